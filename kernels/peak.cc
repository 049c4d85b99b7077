#include "kernels/peak.h"

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "kernels/peak_internal.h"

namespace dllm {
namespace peak_internal {

// kAddsPerBlock register-register adds, each depending on the one before:
// one cycle each on every x86-64 core, so blocks * 16 / seconds is the
// clock. (An add of an immediate would not do: Golden Cove folds those at
// rename, and a chain of them runs several times faster than the clock.)
void DependentAddBlocks(int64_t blocks) {
  int64_t x = 0;
  const int64_t one = 1;
  // Four adds a line, sixteen a block, kept so for counting.
  // clang-format off
  __asm__ volatile(
      "1:\n\t"
      "add %2, %1\n\t" "add %2, %1\n\t" "add %2, %1\n\t" "add %2, %1\n\t"
      "add %2, %1\n\t" "add %2, %1\n\t" "add %2, %1\n\t" "add %2, %1\n\t"
      "add %2, %1\n\t" "add %2, %1\n\t" "add %2, %1\n\t" "add %2, %1\n\t"
      "add %2, %1\n\t" "add %2, %1\n\t" "add %2, %1\n\t" "add %2, %1\n\t"
      "dec %0\n\t"
      "jnz 1b\n\t"
      : "+r"(blocks), "+r"(x)
      : "r"(one)
      : "cc");
  // clang-format on
}

}  // namespace peak_internal

namespace {

using namespace peak_internal;

struct LoopEntry {
  PeakSpec spec;
  void (*run)(int64_t blocks);
  int instructions_per_block;
};

// ops_per_instruction: MACs x 2 (FMAs x 2). instructions_per_cycle: the
// ports documented for server cores (Intel optimization manual; AMX:
// 16 x 16 x 64 MACs per 16 cycles, 1024 MACs a cycle).
const LoopEntry kLoops[] = {
    {{PeakLoop::kAvx2Int8, "avx2-int8", "vpmaddubsw ymm", 64, 2},
     Avx2Int8Blocks,
     kAvx2Int8PerBlock},
    {{PeakLoop::kAvxVnniInt8, "avxvnni-int8", "vpdpbusd ymm", 64, 2},
     AvxVnniInt8Blocks,
     kYmmChainsPerBlock},
    {{PeakLoop::kAvx512VnniInt8, "avx512vnni-int8", "vpdpbusd zmm", 128, 2},
     Avx512VnniInt8Blocks,
     kZmmChainsPerBlock},
    {{PeakLoop::kAmxInt8, "amx-int8", "tdpbusd 16x16x64", 32768, 1.0 / 16},
     AmxInt8Blocks,
     kAmxPerBlock},
    {{PeakLoop::kAvx2Fp32, "avx2-fp32", "vfmadd231ps ymm", 16, 2},
     Avx2Fp32Blocks,
     kYmmChainsPerBlock},
    {{PeakLoop::kAvx512Fp32, "avx512-fp32", "vfmadd231ps zmm", 32, 2},
     Avx512Fp32Blocks,
     kZmmChainsPerBlock},
};

const LoopEntry& EntryOf(PeakLoop loop) {
  for (const LoopEntry& e : kLoops) {
    if (e.spec.loop == loop) return e;
  }
  return kLoops[0];
}

// Runs `run` in doubling block counts until one call lasts `seconds`;
// returns blocks per second of that call.
double BlocksPerSecond(void (*run)(int64_t), double seconds) {
  int64_t blocks = 1024;
  while (true) {
    const auto start = std::chrono::steady_clock::now();
    run(blocks);
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed >= seconds || blocks > (int64_t{1} << 40))
      return static_cast<double>(blocks) / elapsed;
    blocks = elapsed > seconds / 16 ? static_cast<int64_t>(blocks * seconds / elapsed * 1.05)
                                    : blocks * 8;
  }
}

}  // namespace

const PeakSpec& PeakSpecOf(PeakLoop loop) { return EntryOf(loop).spec; }

bool PeakLoopSupported(PeakLoop loop) {
  const CpuFeatures& f = GetCpuFeatures();
  switch (loop) {
    case PeakLoop::kAvx2Int8:
      return IsaLevelSupported(IsaLevel::kAvx2);
    case PeakLoop::kAvxVnniInt8:
      return IsaLevelSupported(IsaLevel::kAvx2) && f.avx_vnni;
    case PeakLoop::kAvx512VnniInt8:
      return IsaLevelSupported(IsaLevel::kAvx512Vnni);
    case PeakLoop::kAmxInt8:
      return IsaLevelSupported(IsaLevel::kAmx);
    case PeakLoop::kAvx2Fp32:
      return IsaLevelSupported(IsaLevel::kAvx2);
    case PeakLoop::kAvx512Fp32:
      return IsaLevelSupported(IsaLevel::kAvx512Vnni);
  }
  return false;
}

std::vector<PeakLoop> SupportedPeakLoops() {
  std::vector<PeakLoop> out;
  for (const LoopEntry& e : kLoops) {
    if (PeakLoopSupported(e.spec.loop)) out.push_back(e.spec.loop);
  }
  return out;
}

double MeasurePeak(PeakLoop loop, double seconds) {
  if (!PeakLoopSupported(loop)) return 0;
  const LoopEntry& e = EntryOf(loop);
  return BlocksPerSecond(e.run, seconds) * e.instructions_per_block * e.spec.ops_per_instruction;
}

double MeasureCoreClockHz(double seconds) {
  return BlocksPerSecond(DependentAddBlocks, seconds) * kAddsPerBlock;
}

PeakReading ReadPeak(PeakLoop loop, double seconds) {
  PeakReading r;
  r.loop = loop;
  // Best of three: on a shared machine one run can be preempted.
  for (int i = 0; i < 3; ++i) {
    r.clock_hz = std::max(r.clock_hz, MeasureCoreClockHz(seconds / 6));
    r.measured = std::max(r.measured, MeasurePeak(loop, seconds / 3));
  }
  const PeakSpec& s = PeakSpecOf(loop);
  r.bound = s.ops_per_instruction * s.instructions_per_cycle * r.clock_hz;
  return r;
}

std::optional<PeakLoop> Int8PeakLoopOf(IsaLevel isa) {
  switch (isa) {
    case IsaLevel::kAmx:
      return PeakLoop::kAmxInt8;
    case IsaLevel::kAvx512Vnni:
      return PeakLoop::kAvx512VnniInt8;
    case IsaLevel::kAvx2:
      return GetCpuFeatures().avx_vnni ? PeakLoop::kAvxVnniInt8 : PeakLoop::kAvx2Int8;
    case IsaLevel::kScalar:
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<PeakLoop> Fp32PeakLoopOf(IsaLevel isa) {
  switch (isa) {
    case IsaLevel::kAmx:
    case IsaLevel::kAvx512Vnni:
      return PeakLoop::kAvx512Fp32;
    case IsaLevel::kAvx2:
      return PeakLoop::kAvx2Fp32;
    case IsaLevel::kScalar:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace dllm
