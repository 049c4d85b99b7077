// POST /infill: llama-server's infill endpoint on the one engine path of
// prompt.suffix (infill_request.h says what is read and how the canvas is
// built). Replies in llama-server's shapes: one compact JSON object (an
// array of them for n_cmpl > 1), or server-sent events of {content, stop:
// false} chunks ending with the whole object with stop: true and no
// [DONE]; errors as {"error": {"code", "message", "type"}}.
#ifndef DLLM_SERVICE_HTTP_INFILL_ENDPOINT_H_
#define DLLM_SERVICE_HTTP_INFILL_ENDPOINT_H_

#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "service/engine/admission.h"
#include "service/http/http_server.h"

namespace dllm {

// Thread-safe.
class InfillEndpoint {
 public:
  // `admission` (non-owning) outlives the endpoint; `model_id` is what
  // responses name the model.
  InfillEndpoint(Admission* admission, std::string model_id);

  void Handle(const HttpRequest& request, HttpResponder& out);

 private:
  // Logs the first time each of `fields` is ignored.
  void WarnIgnoredOnce(const std::vector<std::string>& fields);

  Admission* const admission_;
  const std::string model_id_;
  std::mutex warned_mu_;
  std::set<std::string> warned_;  // field names already logged
  bool warned_full_ = false;      // the log said that warned_ is full
};

}  // namespace dllm

#endif  // DLLM_SERVICE_HTTP_INFILL_ENDPOINT_H_
