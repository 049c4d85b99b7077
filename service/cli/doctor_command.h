// `dllm doctor [MODEL.gguf]`: checks what a user needs before serving.
#ifndef DLLM_SERVICE_CLI_DOCTOR_COMMAND_H_
#define DLLM_SERVICE_CLI_DOCTOR_COMMAND_H_

namespace dllm {

// Prints one line per check ("ok", "warn" or "FAIL" plus what to do) and a
// verdict line. Exit code 0 when ready, 1 on a failed check, 2 on bad usage.
int RunDoctor(int argc, char** argv);

}  // namespace dllm

#endif  // DLLM_SERVICE_CLI_DOCTOR_COMMAND_H_
