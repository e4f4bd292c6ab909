/* Row-wise steps of the model in C, each bit for bit its NumPy original: RMSNorm, the float64
   quantisation of attention's rows, RoPE, and the K/V memo's rotate-and-quantise. */
#include "kernels.h"

/* Model.rmsnorm with exact.rowsum, bit for bit: ms = rowsum(x * x) / d, where rowsum zero-pads the
   row to a power of two and adds halves (a fixed pairwise tree); out = (x * (1 / sqrt(ms + eps))) * w.
   buf: room for the padded row. */
void rms_norm(int64_t n, int64_t d, const double *x, const double *w, double eps, double *out, double *buf)
{
    int64_t width = 1;
    while (width < d) width *= 2;
    for (int64_t i = 0; i < n; i++) {
        const double *xr = x + i * d;
        for (int64_t j = 0; j < d; j++) buf[j] = xr[j] * xr[j];
        for (int64_t j = d; j < width; j++) buf[j] = 0.0;
        for (int64_t h = width / 2; h >= 1; h /= 2)
            for (int64_t j = 0; j < h; j++) buf[j] = buf[j] + buf[j + h];
        double inv = 1.0 / sqrt(buf[0] / (double)d + eps);
        for (int64_t j = 0; j < d; j++) out[i * d + j] = (xr[j] * inv) * w[j];
    }
}

/* exact.quantize_rows(x, bits) with float64 integers out (any bits <= 52), bit for bit. */
int64_t quantize_f64(int64_t n, int64_t K, const double *x, int64_t bits, double *xi, double *sx)
{
    const double top = (double)((1LL << bits) - 1);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        const double *xr = x + i * K;
        double scale = row_scale(xr, K, top, &bad);
        sx[i] = scale;
        round_quotients(xr, K, scale, xi + i * K);
    }
    return bad;
}

/* Model.rope, bit for bit: rows i < n of x (n, heads, D) rotated by position pos[i] with the
   model's tables (cos_t, sin_t: rows of D / 2); out[.., 2j] = x0 * c - x1 * s and
   out[.., 2j + 1] = x0 * s + x1 * c, each product and sum rounded as NumPy rounds them. */
void rope_rows(int64_t n, int64_t heads, int64_t D, const double *x, int64_t ldx, const int64_t *pos,
               const double *cos_t, const double *sin_t, double *out) /* row i of x at x + i * ldx */
{
    const int64_t half = D / 2;
    for (int64_t i = 0; i < n; i++) {
        const double *c = cos_t + pos[i] * half, *sn = sin_t + pos[i] * half;
        for (int64_t h = 0; h < heads; h++) {
            const double *xr = x + i * ldx + h * D;
            double *o = out + (i * heads + h) * D;
            for (int64_t j = 0; j < half; j++) {
                const double x0 = xr[2 * j], x1 = xr[2 * j + 1];
                o[2 * j] = x0 * c[j] - x1 * sn[j];
                o[2 * j + 1] = x0 * sn[j] + x1 * c[j];
            }
        }
    }
}

void rope(int64_t n, int64_t heads, int64_t D, const double *x, const int64_t *pos, const double *cos_t,
          const double *sin_t, double *out)
{
    rope_rows(n, heads, D, x, heads * D, pos, cos_t, sin_t, out);
}

/* ExactOps.quantise_kv(Model.rope(k, pos), v) in one call: k, v (n, Hkv, D) as read from the pool;
   ki, vi (n, Hkv, D) and sk, sv (n, Hkv) out; kbuf: room for the rotated k. Returns 1 on a NaN or
   an infinity. */
int64_t rotate_quantise_kv(int64_t n, int64_t Hkv, int64_t D, const double *k, const double *v, const int64_t *pos,
                           const double *cos_t, const double *sin_t, int64_t k_bits, int64_t v_bits, double *kbuf,
                           double *ki, double *sk, double *vi, double *sv)
{
    rope(n, Hkv, D, k, pos, cos_t, sin_t, kbuf);
    return quantize_f64(n * Hkv, D, kbuf, k_bits, ki, sk) | quantize_f64(n * Hkv, D, v, v_bits, vi, sv);
}
