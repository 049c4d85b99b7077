// `dllm eval --model M --windows FILE [--baseline F.gguf] [--ratios 0.15,0.5,0.9]
// [--json OUT] [--threads N] [--isa I]`: masked-token evaluation through
// dllm's own forward pass, the quality yardstick of the trained tinycode
// model (../shared/reference/quality/README.md). For each window and mask
// ratio, one forward pass over the window with the listed positions set to
// the mask token; each masked position p is scored by its logits row (p - 1
// when the model shifts its logits) with a float64 log-softmax over the
// whole vocabulary: cross-entropy in nats and top-1 accuracy of the true
// token. With --baseline (the F32 file), also the mean KL divergence
// KL(baseline || model) over the same positions: the perplexity/KL table of
// llama.cpp's quantization reports.
#ifndef DLLM_SERVICE_CLI_EVAL_COMMAND_H_
#define DLLM_SERVICE_CLI_EVAL_COMMAND_H_

namespace dllm {

// The figures of one mask ratio.
int RunEval(int argc, char** argv);

}  // namespace dllm

#endif  // DLLM_SERVICE_CLI_EVAL_COMMAND_H_
