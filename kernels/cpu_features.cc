#include "kernels/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace dllm {
namespace {

constexpr int kArchGetXcompPerm = 0x1022;
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtileData = 18;

struct Regs {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

Regs Cpuid(uint32_t leaf, uint32_t subleaf) {
  Regs r;
  __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

uint64_t Xgetbv() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

bool Bit(uint32_t reg, int bit) { return (reg >> bit) & 1u; }

// Linux keeps AMX tile data disabled per process until it is requested.
bool RequestAmxPermission(std::string* reason) {
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) != 0) {
    *reason = "arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) failed: " +
              std::string(std::strerror(errno));
    return false;
  }
  uint64_t mask = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &mask) != 0 ||
      !((mask >> kXfeatureXtileData) & 1u)) {
    *reason = "the kernel did not grant XFEATURE_XTILEDATA";
    return false;
  }
  return true;
}

CpuFeatures Probe() {
  CpuFeatures f;
  const Regs r0 = Cpuid(0, 0);
  const uint32_t max_leaf = r0.eax;
  char vendor[13] = {};
  std::memcpy(vendor, &r0.ebx, 4);
  std::memcpy(vendor + 4, &r0.edx, 4);
  std::memcpy(vendor + 8, &r0.ecx, 4);
  f.vendor = vendor;

  if (Cpuid(0x80000000u, 0).eax >= 0x80000004u) {
    char brand[49] = {};
    for (uint32_t i = 0; i < 3; ++i) {
      const Regs r = Cpuid(0x80000002u + i, 0);
      std::memcpy(brand + 16 * i, &r, 16);
    }
    f.brand = brand;
    const size_t first = f.brand.find_first_not_of(' ');
    f.brand = first == std::string::npos ? "" : f.brand.substr(first);
  }

  const Regs r1 = Cpuid(1, 0);
  const bool osxsave = Bit(r1.ecx, 27);
  f.fma = Bit(r1.ecx, 12);
  f.f16c = Bit(r1.ecx, 29);
  const uint64_t xcr0 = osxsave ? Xgetbv() : 0;
  f.os_avx = (xcr0 & 0x6) == 0x6;
  f.os_avx512 = f.os_avx && (xcr0 & 0xe0) == 0xe0;
  f.os_amx = (xcr0 & 0x60000) == 0x60000;

  if (max_leaf >= 7) {
    const Regs r7 = Cpuid(7, 0);
    f.avx2 = Bit(r7.ebx, 5) && f.os_avx;
    f.avx512f = Bit(r7.ebx, 16) && f.os_avx512;
    f.avx512bw = Bit(r7.ebx, 30) && f.os_avx512;
    f.avx512vl = Bit(r7.ebx, 31) && f.os_avx512;
    f.avx512vnni = Bit(r7.ecx, 11) && f.os_avx512;
    f.amx_bf16 = Bit(r7.edx, 22);
    f.amx_tile = Bit(r7.edx, 24);
    f.amx_int8 = Bit(r7.edx, 25);
    const Regs r71 = Cpuid(7, 1);
    f.avx_vnni = Bit(r71.eax, 4) && f.os_avx;
    f.avx512bf16 = Bit(r71.eax, 5) && f.os_avx512;
  }
  f.fma = f.fma && f.os_avx;
  f.f16c = f.f16c && f.os_avx;

  if (f.amx_tile && f.amx_int8) {
    if (!f.os_amx) {
      f.amx_denied_reason = "the OS does not enable AMX state in XCR0";
    } else {
      f.amx_permitted = RequestAmxPermission(&f.amx_denied_reason);
    }
  }
  return f;
}

}  // namespace

const char* IsaLevelName(IsaLevel level) {
  switch (level) {
    case IsaLevel::kScalar:
      return "scalar";
    case IsaLevel::kAvx2:
      return "avx2";
    case IsaLevel::kAvx512Vnni:
      return "avx512vnni";
    case IsaLevel::kAmx:
      return "amx";
  }
  return "unknown";
}

std::optional<IsaLevel> ParseIsaLevel(std::string_view name) {
  if (name == "scalar") return IsaLevel::kScalar;
  if (name == "avx2") return IsaLevel::kAvx2;
  if (name == "avx512vnni" || name == "avx512") return IsaLevel::kAvx512Vnni;
  if (name == "amx") return IsaLevel::kAmx;
  return std::nullopt;
}

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures features = Probe();
  return features;
}

bool IsaLevelSupported(IsaLevel level) {
  const CpuFeatures& f = GetCpuFeatures();
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  const bool avx512 = avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni;
  switch (level) {
    case IsaLevel::kScalar:
      return true;
    case IsaLevel::kAvx2:
      return avx2;
    case IsaLevel::kAvx512Vnni:
      return avx512;
    case IsaLevel::kAmx:
      return avx512 && f.amx_tile && f.amx_int8 && f.amx_permitted;
  }
  return false;
}

IsaLevel BestIsaLevel() {
  const std::vector<IsaLevel> levels = SupportedIsaLevels();
  return levels.back();
}

std::vector<IsaLevel> SupportedIsaLevels() {
  std::vector<IsaLevel> levels;
  for (IsaLevel level :
       {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512Vnni, IsaLevel::kAmx}) {
    if (IsaLevelSupported(level)) levels.push_back(level);
  }
  return levels;
}

std::string CpuFlagsString(const CpuFeatures& f) {
  std::string out;
  auto add = [&out](bool on, const char* name) {
    if (!on) return;
    if (!out.empty()) out += ' ';
    out += name;
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.f16c, "f16c");
  add(f.avx_vnni, "avx-vnni");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512vl, "avx512vl");
  add(f.avx512vnni, "avx512vnni");
  add(f.avx512bf16, "avx512bf16");
  add(f.amx_tile, "amx-tile");
  add(f.amx_int8, "amx-int8");
  add(f.amx_bf16, "amx-bf16");
  return out;
}

}  // namespace dllm
