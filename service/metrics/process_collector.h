// ProcessCollector: the standard process_* series of the Prometheus client
// guidelines plus dllm's resident-memory split, read from /proc/self at scrape
// time. prometheus-cpp ships no process collector, so this is ours.
#ifndef DLLM_SERVICE_METRICS_PROCESS_COLLECTOR_H_
#define DLLM_SERVICE_METRICS_PROCESS_COLLECTOR_H_

#include <string>
#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace dllm {

// Collect() reads /proc on every call; series whose source is unreadable
// report 0 rather than disappear, so dashboards never lose a line.
// Thread-safe: Collect() keeps no state besides what the constructor fixed.
class ProcessCollector : public prometheus::Collectable {
 public:
  // `model_name` is the constant `model` label of the dllm_process_* gauges;
  // the standard process_* series carry no labels.
  explicit ProcessCollector(std::string model_name);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::string model_name_;
  double start_time_seconds_ = 0;  // fixed for the life of the process
};

}  // namespace dllm

#endif  // DLLM_SERVICE_METRICS_PROCESS_COLLECTOR_H_
