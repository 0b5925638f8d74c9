// The error bounds of the bf16 flash kernels (train.precision = "bf16")
// against fp64 on the same inputs (qkv bf16 numbers, as the kernels read them from bf16 storage;
// dout fp32), with a first-order bound per element derived from where
// they round (u = 2^-8 per bf16 rounding, e = 2^-24 per fp32 operation), in
// the exact fp64 quantities p (probabilities), dP = dy.v, D = dy.y, dS:
//   scores   eps_ts = scale ((2u + u^2) + (hs + 2) e) sum_i |q_ti k_si|  (q, k rounded)
//   lse      d_t   = max_s eps_ts + (T + 16) e (1 + |lse_t|)
//   y        sum_s p_ts (eps_ts + max_s eps_ts + 2u + (T + 16) e) |v_si|  (P, v rounded)
//   p        rel. error rho_ts = eps_ts + d_t + 4e  (recomputed from lse)
//   dS       scale (rho p |dP - D| + p (|ddP| + |dD|)) + (u + 4e) |dS|  (then rounded)
//            with |ddP| <= ((2u + u^2) + (hs + 2) e) sum_i |dy v|, and D from
//            the output rounded to bf16 (as the model keeps it):
//            |dD| <= sum_i |dy| ((1 + u) tol_y + u |y|) + (hs + 2) e sum_i |dy y|
//   dq       sum_s (|ddS| + (u + (T + 2) e) |dS|) |k|       (k rounded)
//   dk       sum over the group's heads and t of the same with q
//   dv       sum (rho + 2u + (T + 2) e) p |dy|               (P, dy rounded)
// times 1.25 for the second-order terms. The rounding terms of q, k and v
// stay in the bound although those are bf16 numbers here (an overestimate of
// u per product: the bound also holds for a kernel that rounds fp32 q, k, v).
// The order of the fp32 sums does not enter (scalar or tile kernels alike).
// Used by the conformance suite (tests/kernels/test_conformance.cpp) and by
// tera-device-check (tests/gpu/device_check.cpp): no dependency beyond the
// standard library.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace tera::testing {

struct FlashBf16Bounds {
  std::vector<double> y, lse, dqkv;  // per element of out [B,T,H*hs], lse [B,H,T], dqkv [B,T,(H+2KV)*hs]
};

// qkv: bf16 numbers as doubles; R: dout; y and lse: the fp64 flash forward
// on qkv (cpu::flash_attention_forward<double>).
inline FlashBf16Bounds flash_bf16_bounds(const std::vector<double>& qkv, const std::vector<double>& R,
                                         const std::vector<double>& y, const std::vector<double>& lse, int64_t B,
                                         int64_t T, int64_t H, int64_t KV, int64_t hs) {
  constexpr double u = 1.0 / 256, e = 5.96e-8, slack = 1.25;  // bf16's and fp32's unit roundoff
  const int64_t C = H * hs, W = (H + 2 * KV) * hs, grp = H / KV;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  const double prod = 2 * u + u * u + (hs + 2) * e;
  FlashBf16Bounds out{std::vector<double>(y.size()), std::vector<double>(lse.size()), std::vector<double>(qkv.size(), 0.0)};
  auto& tol_y = out.y;
  auto& tol_l = out.lse;
  auto& tol_d = out.dqkv;
  auto at = [&](int64_t b, int64_t t, int64_t col) { return qkv[(b * T + t) * W + col]; };
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / grp;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t row = (b * H + h) * T + t;
        std::vector<double> eps(t + 1), p(t + 1);
        double eps_max = 0;
        for (int64_t s = 0; s <= t; ++s) {
          double a = 0, sc = 0;
          for (int64_t i = 0; i < hs; ++i) {
            a += std::abs(at(b, t, h * hs + i) * at(b, s, (H + g) * hs + i));
            sc += at(b, t, h * hs + i) * at(b, s, (H + g) * hs + i);
          }
          eps[s] = scale * prod * a;
          eps_max = std::max(eps_max, eps[s]);
          p[s] = std::exp(sc * scale - lse[row]);
        }
        tol_l[row] = slack * (eps_max + (T + 16) * e * (1 + std::abs(lse[row])));
        const double* dy = &R[(b * T + t) * C + h * hs];
        double dD = 0, dyy = 0;
        for (int64_t i = 0; i < hs; ++i) {
          double m = 0;
          for (int64_t s = 0; s <= t; ++s) m += p[s] * (eps[s] + eps_max + 2 * u + (T + 16) * e) * std::abs(at(b, s, (H + KV + g) * hs + i));
          tol_y[(b * T + t) * C + h * hs + i] = slack * m;
          dD += std::abs(dy[i]) * ((1 + u) * slack * m + u * std::abs(y[(b * T + t) * C + h * hs + i]));
          dyy += std::abs(dy[i] * y[(b * T + t) * C + h * hs + i]);
        }
        dD += (hs + 2) * e * dyy;
        double Dt = 0;
        for (int64_t i = 0; i < hs; ++i) Dt += dy[i] * y[(b * T + t) * C + h * hs + i];
        for (int64_t s = 0; s <= t; ++s) {
          double dP = 0, dPa = 0;
          for (int64_t i = 0; i < hs; ++i) {
            dP += dy[i] * at(b, s, (H + KV + g) * hs + i);
            dPa += std::abs(dy[i] * at(b, s, (H + KV + g) * hs + i));
          }
          const double rho = eps[s] + tol_l[row] + 4 * e;
          const double dS = p[s] * (dP - Dt) * scale;
          const double ddS = scale * (rho * p[s] * std::abs(dP - Dt) + p[s] * (prod * dPa + dD)) + (u + 4 * e) * std::abs(dS);
          const double w = ddS + (u + (T + 2) * e) * std::abs(dS);
          for (int64_t i = 0; i < hs; ++i) {
            tol_d[(b * T + t) * W + h * hs + i] += slack * w * std::abs(at(b, s, (H + g) * hs + i));
            tol_d[(b * T + s) * W + (H + g) * hs + i] += slack * w * std::abs(at(b, t, h * hs + i));
            tol_d[(b * T + s) * W + (H + KV + g) * hs + i] += slack * (rho + 2 * u + (T + 2) * e) * p[s] * std::abs(dy[i]);
          }
        }
      }
    }
  }
  return out;
}

}  // namespace tera::testing
