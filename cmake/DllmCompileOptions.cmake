# Warnings per target (dllm_target_defaults) and the sanitizer build
# (dllm_enable_sanitizers, called once from the top CMakeLists.txt).

function(dllm_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra)
endfunction()

# DLLM_SANITIZE=address: ASan + UBSan; DLLM_SANITIZE=thread: TSan. The flags
# are directory-wide so every target this project defines is instrumented
# (libraries, generated proto code, tests, tools), while the Debian shared
# libraries it links against (gRPC, protobuf, oneTBB, Abseil) stay as
# packaged. scripts/test-sanitizers drives both builds.
macro(dllm_enable_sanitizers)
  if(DLLM_SANITIZE STREQUAL "address")
    # UBSan aborts on the first finding so a test fails instead of logging;
    # vptr stays recoverable only so tests/sanitizers/ubsan.supp can silence
    # one oneTBB header finding (an unrecoverable check ignores suppressions;
    # UBSAN_OPTIONS=halt_on_error=1 still stops on any other).
    add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                        -fno-sanitize-recover=undefined -fsanitize-recover=vptr)
    add_link_options(-fsanitize=address,undefined)
  elseif(DLLM_SANITIZE STREQUAL "thread")
    add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
    add_link_options(-fsanitize=thread)
  elseif(NOT DLLM_SANITIZE STREQUAL "")
    message(FATAL_ERROR "DLLM_SANITIZE must be '', 'address' or 'thread'")
  endif()
endmacro()
