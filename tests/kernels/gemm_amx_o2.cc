// kernels/gemm_amx.cc built at -O2 with the AMX flags, renamed into
// namespace `gemm_internal_o2` (see gemm_amx_o2_test.cc).
#define gemm_internal gemm_internal_o2
#include "kernels/gemm_amx.cc"
