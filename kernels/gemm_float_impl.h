// Body of the float-weight GEMM tile, compiled per ISA by
// gemm_float_{scalar,avx2,avx512}.cc (each with its own -m flags) so the
// inner loops vectorise to that width. Include inside an anonymous namespace.

void ConvertPanel(const dllm::FloatGemmArgs& a, int64_t n0, int64_t nt, float* panel) {
  // panel[k][j] = W[n0 + j][k]; columns past `nt` are zero.
  for (int64_t j = 0; j < dllm::kFloatGemmTileN; ++j) {
    const uint8_t* row = static_cast<const uint8_t*>(a.w) + (n0 + j) * a.w_row_bytes;
    if (j >= nt) {
      for (int64_t c = 0; c < a.k; ++c) panel[c * dllm::kFloatGemmTileN + j] = 0.0f;
      continue;
    }
    switch (a.type) {
      case dllm::GgmlType::kF16: {
        const uint16_t* h = reinterpret_cast<const uint16_t*>(row);
        for (int64_t c = 0; c < a.k; ++c) panel[c * dllm::kFloatGemmTileN + j] = HalfToFloat(h[c]);
        break;
      }
      case dllm::GgmlType::kBF16: {
        const uint16_t* h = reinterpret_cast<const uint16_t*>(row);
        for (int64_t c = 0; c < a.k; ++c) {
          const uint32_t bits = static_cast<uint32_t>(h[c]) << 16;
          float f;
          std::memcpy(&f, &bits, 4);
          panel[c * dllm::kFloatGemmTileN + j] = f;
        }
        break;
      }
      default: {
        const float* f = reinterpret_cast<const float*>(row);
        for (int64_t c = 0; c < a.k; ++c) panel[c * dllm::kFloatGemmTileN + j] = f[c];
        break;
      }
    }
  }
}

void FloatGemmTileImpl(const dllm::FloatGemmArgs& a, int64_t tile, float* panel) {
  constexpr int kN = dllm::kFloatGemmTileN;
  constexpr int kM = 4;  // activation rows sharing each panel load
  const int64_t n0 = tile * kN;
  const int64_t nt = a.n - n0 < kN ? a.n - n0 : kN;
  ConvertPanel(a, n0, nt, panel);
  for (int64_t i0 = 0; i0 < a.m; i0 += kM) {
    const int64_t mi = a.m - i0 < kM ? a.m - i0 : kM;
    const float* xr[kM];
    for (int64_t r = 0; r < kM; ++r) {
      const int64_t i = i0 + (r < mi ? r : 0);
      xr[r] = a.x + (a.rows ? a.rows[i] : i) * a.ldx;
    }
    float acc[kM][kN] = {};
    for (int64_t c = 0; c < a.k; ++c) {
      const float* p = panel + c * kN;
      for (int r = 0; r < kM; ++r) {
        const float xv = xr[r][c];
        for (int j = 0; j < kN; ++j) acc[r][j] += xv * p[j];
      }
    }
    for (int64_t r = 0; r < mi; ++r) {
      float* y = a.y + (i0 + r) * a.ldy + n0;
      for (int64_t j = 0; j < nt; ++j) y[j] = acc[r][j];
    }
  }
}
