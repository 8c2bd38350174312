// 1D- and 2D-CSAN attention (no padding, no dropout) on the CPU, in O(time * window * head window).
//
// Built by csan.kernels.native with the machine's own C++ compiler (no PyTorch headers: plain
// pointers and element strides, called through ctypes, which releases the GIL, so csan's threads
// run the units side by side). Notation as in SPEC.md: q, k, v are (batch, heads, time, d_h) with
// any strides but a contiguous last dimension; query i of head h reads keys j = i - left + r,
// r in [0, M), M = left + right + 1, those inside [0, time), of the N heads it reads (Shape).
//
// Forward, per query: M dot products, one softmax over the slots, the weighted sum of M value rows;
// the weights P (rows, time, M) are kept for the backward. Backward in two passes, so that no two
// units ever write the same row: (1) per query, dP = g . v, dS = P * (dP - sum(P * dP)) * scale,
// dq = sum dS k; (2) per key, dk = sum over the queries that read it of dS q, dv = sum of P g. The
// exponential is a polynomial the compiler vectorises over a block of queries' slots.

#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

using i64 = std::int64_t;

constexpr int kQueryBlock = 16;  // queries whose logits are exponentiated in one vector pass
constexpr int kMaxWindow = 1024;  // slots * M above this: csan.kernels.native declines the call
constexpr int kMaxHead = 1024;  // d_h above this: declined as well

// exp(x) for x <= 0 (a logit minus its row's maximum): 2^n * 2^f, |f| <= 1/2, by Horner.
inline float exp_nonpositive(float x) {
  float t = x * 1.44269504088896341f;
  t = t < -126.0f ? -126.0f : t;
  const float n = (t + 12582912.0f) - 12582912.0f;  // round to nearest (1.5 * 2^23)
  const float f = (t - n) * 0.693147180559945309f;
  float p = 1.0f / 5040.0f;
  p = p * f + 1.0f / 720.0f;
  p = p * f + 1.0f / 120.0f;
  p = p * f + 1.0f / 24.0f;
  p = p * f + 1.0f / 6.0f;
  p = p * f + 0.5f;
  p = p * f + 1.0f;
  p = p * f + 1.0f;
  std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline double exp_nonpositive(double x) { return std::exp(x); }

template <typename T>
inline T dot(const T* __restrict a, const T* __restrict b, i64 d) {
  T acc = 0;
#pragma omp simd reduction(+ : acc)
  for (i64 e = 0; e < d; ++e) acc += a[e] * b[e];
  return acc;
}

template <typename T>
inline void axpy(T* __restrict y, T alpha, const T* __restrict x, i64 d) {
#pragma omp simd
  for (i64 e = 0; e < d; ++e) y[e] += alpha * x[e];
}

struct Strides {
  i64 batch, head, time;
  i64 at(i64 b, i64 h, i64 t) const { return b * batch + h * head + t * time; }
};

// Query (b, h, i) reads slot (s, r): key (b, sources[h][s], i - left + r) where sources[h][s] >= 0
// (-1: a head past the edge, "clip") and the position lies inside the sequence; one softmax over all
// slots * window of them. readers[h'] lists the (h, s) pairs whose slot s is head h', -1 padded.
struct Shape {
  i64 heads, time, d, left, right, slots;
  const i64* sources;  // (heads, slots)
  const i64* readers;  // (heads, slots, 2)
  i64 window() const { return left + right + 1; }
  i64 width() const { return slots * window(); }
  // the positions [lo, hi) of query i's window that lie inside the sequence
  i64 lo(i64 i) const { return i < left ? left - i : 0; }
  i64 hi(i64 i) const { return i + right >= time ? time - i + left : window(); }
};

template <typename T>
void forward(const T* q, const T* k, const T* v, T* out, T* weights, const Shape& s,
             const Strides& qs, const Strides& ks, const Strides& vs, T scale, i64 r0, i64 r1,
             i64 t0, i64 t1) {
  const i64 m = s.window(), w = s.width(), d = s.d;
  T buf[kQueryBlock * kMaxWindow];
  T o[kMaxHead];  // a query's output, summed on the stack: its stores alias no input
  for (i64 row = r0; row < r1; ++row) {
    const i64 b = row / s.heads, h = row % s.heads;
    const i64* src = s.sources + h * s.slots;
    const T* qr = q + qs.at(b, h, 0);
    T* orow = out + row * s.time * d;
    T* prow = weights + row * s.time * w;
    for (i64 i0 = t0; i0 < t1; i0 += kQueryBlock) {
      const i64 n = i0 + kQueryBlock < t1 ? kQueryBlock : t1 - i0;
      for (i64 a = 0; a < n; ++a) {  // logits, minus the row's maximum; -200 where blocked
        const i64 i = i0 + a, lo = s.lo(i), hi = s.hi(i);
        T* x = buf + a * w;
        T top = -INFINITY;
        for (i64 e = 0; e < w; ++e) x[e] = T(-INFINITY);
        for (i64 slot = 0; slot < s.slots; ++slot) {
          if (src[slot] < 0) continue;
          const T* kr = k + ks.at(b, src[slot], 0);
          for (i64 r = lo; r < hi; ++r) {
            const T logit = scale * dot(qr + i * qs.time, kr + (i - s.left + r) * ks.time, d);
            x[slot * m + r] = logit;
            top = logit > top ? logit : top;
          }
        }
        for (i64 e = 0; e < w; ++e) x[e] = x[e] == T(-INFINITY) ? T(-200) : x[e] - top;
      }
#pragma omp simd
      for (i64 e = 0; e < n * w; ++e) buf[e] = exp_nonpositive(buf[e]);
      for (i64 a = 0; a < n; ++a) {  // normalise, keep, sum the values
        const i64 i = i0 + a, lo = s.lo(i), hi = s.hi(i);
        const T* x = buf + a * w;
        T* p = prow + i * w;
        T total = 0;
        for (i64 e = 0; e < w; ++e) p[e] = 0;
        for (i64 slot = 0; slot < s.slots; ++slot) {
          if (src[slot] < 0) continue;
          for (i64 r = lo; r < hi; ++r) total += x[slot * m + r];
        }
        const T inv = T(1) / total;  // >= 1: every query reads its own key
        std::memset(o, 0, sizeof(T) * d);
        for (i64 slot = 0; slot < s.slots; ++slot) {
          if (src[slot] < 0) continue;
          const T* vr = v + vs.at(b, src[slot], 0);
          for (i64 r = lo; r < hi; ++r) {
            p[slot * m + r] = x[slot * m + r] * inv;
            axpy(o, p[slot * m + r], vr + (i - s.left + r) * vs.time, d);
          }
        }
        std::memcpy(orow + i * d, o, sizeof(T) * d);
      }
    }
  }
}

// Query i's dS over its band, into x (the caller's stack buffer of width() numbers): dP = dO_i . V_j,
// delta = sum p dP, dS = p (dP - delta) scale, and 0 where p is (outside the band, absent heads).
template <typename T>
inline void query_dlogits(T* __restrict x, const T* p, const T* gi, const T* v, const i64* src,
                          const Shape& s, const Strides& vs, i64 b, i64 i, i64 lo, i64 hi,
                          T scale) {
  const i64 m = s.window(), w = s.width(), d = s.d;
  T delta = 0;
  for (i64 e = 0; e < w; ++e) x[e] = 0;
  for (i64 slot = 0; slot < s.slots; ++slot) {
    if (src[slot] < 0) continue;
    const T* vr = v + vs.at(b, src[slot], 0);
    for (i64 r = lo; r < hi; ++r) {
      const T dp = dot(gi, vr + (i - s.left + r) * vs.time, d);
      x[slot * m + r] = dp;
      delta += p[slot * m + r] * dp;
    }
  }
  for (i64 e = 0; e < w; ++e) x[e] = p[e] * (x[e] - delta) * scale;
}

template <typename T>
void backward_queries(const T* k, const T* v, const T* g, const T* weights, T* dlogits, T* dq,
                      const Shape& s, const Strides& ks, const Strides& vs, const Strides& gs,
                      T scale, i64 r0, i64 r1, i64 t0, i64 t1) {
  const i64 m = s.window(), w = s.width(), d = s.d;
  T x[kMaxWindow];  // this query's dP, then dS: on the stack, so the stores alias nothing
  for (i64 row = r0; row < r1; ++row) {
    const i64 b = row / s.heads, h = row % s.heads;
    const i64* src = s.sources + h * s.slots;
    const T* gr = g + gs.at(b, h, 0);
    for (i64 i = t0; i < t1; ++i) {
      const i64 lo = s.lo(i), hi = s.hi(i);
      const T* p = weights + (row * s.time + i) * w;
      const T* gi = gr + i * gs.time;
      query_dlogits(x, p, gi, v, src, s, vs, b, i, lo, hi, scale);
      T* dqi = dq + (row * s.time + i) * d;
      std::memset(dqi, 0, sizeof(T) * d);
      for (i64 slot = 0; slot < s.slots; ++slot) {
        if (src[slot] < 0) continue;
        const T* kr = k + ks.at(b, src[slot], 0);
        for (i64 r = lo; r < hi; ++r) axpy(dqi, x[slot * m + r], kr + (i - s.left + r) * ks.time, d);
      }
      std::memcpy(dlogits + (row * s.time + i) * w, x, sizeof(T) * w);
    }
  }
}

template <typename T>
void backward_keys(const T* q, const T* g, const T* weights, const T* dlogits, T* dk, T* dv,
                   const Shape& s, const Strides& qs, const Strides& gs, i64 r0, i64 r1, i64 t0,
                   i64 t1) {
  const i64 m = s.window(), w = s.width(), d = s.d;
  T dkj[kMaxHead], dvj[kMaxHead];  // this key's gradients, on the stack (no aliasing)
  for (i64 row = r0; row < r1; ++row) {
    const i64 b = row / s.heads, h = row % s.heads;  // the key head
    const i64* readers = s.readers + h * s.slots * 2;
    for (i64 j = t0; j < t1; ++j) {
      std::memset(dkj, 0, sizeof(T) * d);
      std::memset(dvj, 0, sizeof(T) * d);
      // the queries that read key j in the order the one-pass form adds them (query ascending,
      // then reader head and slot), so both forms give the same sums, bit for bit
      const i64 i0 = j - s.right > 0 ? j - s.right : 0;
      const i64 i1 = j + s.left < s.time - 1 ? j + s.left : s.time - 1;
      for (i64 i = i0; i <= i1; ++i) {
        const i64 r = j + s.left - i;  // key j is position r of query i
        for (i64 c = 0; c < s.slots; ++c) {
          const i64 reader = readers[2 * c], slot = readers[2 * c + 1];
          if (reader < 0) continue;
          const i64 rrow = b * s.heads + reader, at = (rrow * s.time + i) * w + slot * m + r;
          axpy(dkj, dlogits[at], q + qs.at(b, reader, i), d);
          axpy(dvj, weights[at], g + gs.at(b, reader, i), d);
        }
      }
      std::memcpy(dk + (row * s.time + j) * d, dkj, sizeof(T) * d);
      std::memcpy(dv + (row * s.time + j) * d, dvj, sizeof(T) * d);
    }
  }
}

template <typename T>
void backward_group(const T* q, const T* k, const T* v, const T* g, const T* weights, T* dq, T* dk,
                    T* dv, const Shape& s, const Strides& qs, const Strides& ks, const Strides& vs,
                    const Strides& gs, T scale, i64 r0, i64 r1) {
  const i64 m = s.window(), w = s.width(), d = s.d;
  const i64 first = s.right < s.time ? s.right : s.time;
  T x[kMaxWindow];
  for (i64 row = r0; row < r1; ++row) {  // the key rows before query 0's last
    std::memset(dk + row * s.time * d, 0, sizeof(T) * d * first);
    std::memset(dv + row * s.time * d, 0, sizeof(T) * d * first);
  }
  for (i64 i = 0; i < s.time; ++i) {
    if (i + s.right < s.time) {  // the key rows query i is the first to read
      for (i64 row = r0; row < r1; ++row) {
        std::memset(dk + (row * s.time + i + s.right) * d, 0, sizeof(T) * d);
        std::memset(dv + (row * s.time + i + s.right) * d, 0, sizeof(T) * d);
      }
    }
    const i64 lo = s.lo(i), hi = s.hi(i);
    for (i64 row = r0; row < r1; ++row) {
      const i64 b = row / s.heads, h = row % s.heads;
      const i64* src = s.sources + h * s.slots;
      const T* p = weights + (row * s.time + i) * w;
      const T* gi = g + gs.at(b, h, i);
      query_dlogits(x, p, gi, v, src, s, vs, b, i, lo, hi, scale);
      const T* qi = q + qs.at(b, h, i);
      T* dqi = dq + (row * s.time + i) * d;
      std::memset(dqi, 0, sizeof(T) * d);
      for (i64 slot = 0; slot < s.slots; ++slot) {
        if (src[slot] < 0) continue;
        const i64 key_row = b * s.heads + src[slot];
        const T* kr = k + ks.at(b, src[slot], 0);
        for (i64 r = lo; r < hi; ++r) {
          const i64 j = i - s.left + r, e = slot * m + r;
          axpy(dqi, x[e], kr + j * ks.time, d);
          axpy(dk + (key_row * s.time + j) * d, x[e], qi, d);
          axpy(dv + (key_row * s.time + j) * d, p[e], gi, d);
        }
      }
    }
  }
}

// One pass, for units that own every row their queries' keys lie in (whole (batch, head) rows when
// N = 1, whole batches otherwise): per query dS as above, its query gradient, and its key and value
// gradients added into the key rows it read, each zeroed just before its first use (rows are first
// read in order: query i first reads key i + right), so there is no dS buffer and no second pass.
template <typename T>
void backward_fused(const T* q, const T* k, const T* v, const T* g, const T* weights, T* dq, T* dk,
                    T* dv, const Shape& s, const Strides& qs, const Strides& ks, const Strides& vs,
                    const Strides& gs, T scale, i64 r0, i64 r1) {
  const i64 group = s.slots == 1 ? 1 : s.heads;  // the rows that write each other's key rows
  for (i64 g0 = r0; g0 < r1; g0 += group) {
    backward_group(q, k, v, g, weights, dq, dk, dv, s, qs, ks, vs, gs, scale, g0, g0 + group);
  }
}

}  // namespace

// The entry points: arrays as addresses; shape = (heads, time, d_h, left, right, slots); element
// strides (batch, head, time) of q, k, v and the output gradient; ``count`` units of work, each
// (first row, end row, first position, end position) of the batch * heads rows, run in parallel on
// the caller's OpenMP threads where the library is built with OpenMP (in a PyTorch process that is
// PyTorch's own pool: its libgomp is loaded first, under the same soname, so no second set of
// threads competes with PyTorch's, which spin for a while after each of its parallel operations),
// else one after the other (csan.kernels.native then calls one unit a thread of its own pool).
// out, weights, dlogits, dq, dk, dv are contiguous.
#define CSAN_SHAPE \
  const Shape s{shape[0], shape[1], shape[2], shape[3], shape[4], shape[5], sources, readers}
#define CSAN_UNITS(call)                                        \
  _Pragma("omp parallel for schedule(static, 1) if (count > 1)") \
  for (i64 u = 0; u < count; ++u) {                             \
    const i64* unit = units + 4 * u;                            \
    call;                                                       \
  }
#define CSAN_ENTRY_POINTS(T, suffix)                                                               \
  extern "C" void csan_forward_##suffix(const T* q, const T* k, const T* v, T* out, T* weights,    \
                                       const i64* shape, const i64* sources, const i64* readers,   \
                                       const i64* st, double scale, const i64* units, i64 count) { \
    CSAN_SHAPE;                                                                                    \
    CSAN_UNITS(forward(q, k, v, out, weights, s, Strides{st[0], st[1], st[2]},                     \
                       Strides{st[3], st[4], st[5]}, Strides{st[6], st[7], st[8]}, T(scale),       \
                       unit[0], unit[1], unit[2], unit[3]))                                        \
  }                                                                                                \
  extern "C" void csan_backward_queries_##suffix(                                                  \
      const T* k, const T* v, const T* g, const T* weights, T* dlogits, T* dq, const i64* shape,    \
      const i64* sources, const i64* readers, const i64* st, double scale, const i64* units,       \
      i64 count) {                                                                                 \
    CSAN_SHAPE;                                                                                    \
    CSAN_UNITS(backward_queries(k, v, g, weights, dlogits, dq, s, Strides{st[3], st[4], st[5]},    \
                                Strides{st[6], st[7], st[8]}, Strides{st[9], st[10], st[11]},      \
                                T(scale), unit[0], unit[1], unit[2], unit[3]))                     \
  }                                                                                                \
  extern "C" void csan_backward_keys_##suffix(                                                     \
      const T* q, const T* g, const T* weights, const T* dlogits, T* dk, T* dv, const i64* shape,   \
      const i64* sources, const i64* readers, const i64* st, const i64* units, i64 count) {         \
    CSAN_SHAPE;                                                                                    \
    CSAN_UNITS(backward_keys(q, g, weights, dlogits, dk, dv, s, Strides{st[0], st[1], st[2]},      \
                             Strides{st[9], st[10], st[11]}, unit[0], unit[1], unit[2], unit[3]))  \
  }                                                                                                \
  extern "C" void csan_backward_fused_##suffix(                                                    \
      const T* q, const T* k, const T* v, const T* g, const T* weights, T* dq, T* dk, T* dv,        \
      const i64* shape, const i64* sources, const i64* readers, const i64* st, double scale,       \
      const i64* units, i64 count) {                                                               \
    CSAN_SHAPE;                                                                                    \
    CSAN_UNITS(backward_fused(q, k, v, g, weights, dq, dk, dv, s, Strides{st[0], st[1], st[2]},    \
                              Strides{st[3], st[4], st[5]}, Strides{st[6], st[7], st[8]},          \
                              Strides{st[9], st[10], st[11]}, T(scale), unit[0], unit[1]))         \
  }

CSAN_ENTRY_POINTS(float, f32)
CSAN_ENTRY_POINTS(double, f64)

extern "C" int csan_max_window() { return kMaxWindow; }

extern "C" int csan_openmp() {
#ifdef _OPENMP
  return 1;
#else
  return 0;
#endif
}
