// `dllm bench --model M`: end-to-end denoising speed on any GGUF file — load
// time, ms per step (median and spread after warm-up), forward and sampling
// time, tokens/s and peak RSS per thread count and canvas, next to the
// machine's memory-bandwidth floor — as a JSON result file.
#ifndef DLLM_SERVICE_CLI_BENCH_COMMAND_H_
#define DLLM_SERVICE_CLI_BENCH_COMMAND_H_

namespace dllm {

int RunBench(int argc, char** argv);

}  // namespace dllm

#endif  // DLLM_SERVICE_CLI_BENCH_COMMAND_H_
