// Register-only peak loops: the denominators of every "% of peak" figure,
// and the documented bound each one is checked against.
//
// Each loop is a fixed block of independent instructions in inline asm
// (kernels/peak_*.cc, one translation unit per ISA), so the compiler can
// neither spill the accumulators to the stack nor hoist the work: 15 (ymm)
// or 16 (zmm) chains cover latency x ports of vpdpbusd, vpmaddubsw and
// vfmadd (4-5 cycles on 2 ports, 8-10 in flight); AMX keeps 4 C tiles. The first peak loop of this
// project kept 12 accumulators in a C array that GCC stored and reloaded every iteration, and
// measured a quarter of the real VNNI rate.
//
// The bound is documented ports x operations per instruction x the core
// clock, and the clock is measured here too (a chain of dependent adds, one
// cycle each). A measured peak above its bound, or a kernel above its peak,
// means the loop or the table below is wrong; the benchmarks say so loudly.
#ifndef DLLM_KERNELS_PEAK_H_
#define DLLM_KERNELS_PEAK_H_

#include <optional>
#include <vector>

#include "kernels/cpu_features.h"

namespace dllm {

enum class PeakLoop {
  kAvx2Int8,        // vpmaddubsw ymm (the AVX2 kernel's multiply; 32 MACs)
  kAvxVnniInt8,     // {vex} vpdpbusd ymm (32 MACs)
  kAvx512VnniInt8,  // vpdpbusd zmm (64 MACs)
  kAmxInt8,         // tdpbusd on resident tiles (16 x 16 x 64 MACs)
  kAvx2Fp32,        // vfmadd231ps ymm (8 FMAs)
  kAvx512Fp32,      // vfmadd231ps zmm (16 FMAs)
};

struct PeakSpec {
  PeakLoop loop;
  const char* name;            // "avx512vnni-int8", ...
  const char* instruction;     // what the loop issues
  double ops_per_instruction;  // 2 per multiply-add
  // Instructions per cycle per core, from the vendors' optimization manuals
  // (Intel: 2 ports for 256/512-bit integer and FMA on server cores; AMX: one
  // 16x16x64 tile product per 16 cycles).
  double instructions_per_cycle;
};

const PeakSpec& PeakSpecOf(PeakLoop loop);
// Whether this CPU (and OS, for AMX) can run `loop`.
bool PeakLoopSupported(PeakLoop loop);
// Every loop this machine can run.
std::vector<PeakLoop> SupportedPeakLoops();

// Runs `loop` on the calling thread for about `seconds`; operations/s.
double MeasurePeak(PeakLoop loop, double seconds);
// The core clock in Hz while running dependent adds for about `seconds`.
double MeasureCoreClockHz(double seconds);

struct PeakReading {
  PeakLoop loop;
  double measured = 0;  // ops/s, best of a few runs
  double clock_hz = 0;  // measured just before
  double bound = 0;     // ops_per_instruction * instructions_per_cycle * clock_hz
  // measured / bound; a little above 1 is clock noise, well above it a bug.
  double ratio() const { return bound > 0 ? measured / bound : 0; }
  bool exceeds_bound() const { return ratio() > 1.05; }
};
PeakReading ReadPeak(PeakLoop loop, double seconds);

// The int8 loop whose rate the GEMM of `isa` is judged against (AVX2 with
// AVX-VNNI runs vpdpbusd ymm), and the FP32 loop attention on `isa` is;
// none for scalar.
std::optional<PeakLoop> Int8PeakLoopOf(IsaLevel isa);
std::optional<PeakLoop> Fp32PeakLoopOf(IsaLevel isa);

}  // namespace dllm

#endif  // DLLM_KERNELS_PEAK_H_
