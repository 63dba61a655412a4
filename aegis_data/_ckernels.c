/*
 * Compiled inner loops of the aegis-v1 corruption engine (module aegis_data._ckernels).
 *
 * Each function fuses, per element, exactly the IEEE-754 float32/float64 operations that the NumPy code in
 * aegis_data/_kernels.py and aegis_data/corruptions.py performs, in the same order and with the same types, so
 * the output bytes are those of the NumPy path (tests compare both on every kernel). What makes that hold:
 *
 *   - only + - * / on float and double, each correctly rounded by IEEE-754 whatever the compiler vectorises;
 *   - no contraction of a*b+c into a fused multiply-add (which rounds once instead of twice): the pragma below
 *     and -ffp-contract=off in setup.py; no -ffast-math (no reassociation);
 *   - float <-> double and float -> integer conversions as C defines them (truncation for the in-range values
 *     used here), which is what NumPy's casts do.
 *
 * Arrays arrive through the buffer protocol as flat, C-contiguous memory; the Python wrappers in
 * aegis_data/_kernels.py check dtypes and shapes, and the sizes are checked again here.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
#if defined(_MSC_VER) && !defined(__clang__)
#define restrict __restrict
#endif

#if defined(__FLT_EVAL_METHOD__) && __FLT_EVAL_METHOD__ != 0
#error "float expressions must be evaluated in their own precision (SSE2, not x87): rebuild for SSE2"
#endif

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && !defined(AEGIS_NO_CLONES)
/* Also compiled for AVX2 (wider vectors; no FMA: the avx2 target does not enable it, and contraction is off),
 * chosen at load time by the CPU. Element-wise IEEE operations give the same results at any vector width.
 * -DAEGIS_NO_CLONES builds the baseline only (the determinism tests compare both builds). */
#define VECTORISED __attribute__((target_clones("avx2", "default")))
#else
#define VECTORISED
#endif

typedef struct {
    Py_buffer views[12];
    int n;
    int failed; /* set by the first get() that fails; later calls then return NULL without trying */
} Buffers;

static void release(Buffers *b) {
    for (int i = 0; i < b->n; i++) PyBuffer_Release(&b->views[i]);
    b->n = 0;
}

/* a * b for buffer sizes; -1 when either is negative (or already -1) or the product overflows, which get()
 * refuses: a size computed from hostile arguments must never wrap around to a small buffer. */
static Py_ssize_t mul(Py_ssize_t a, Py_ssize_t b) {
    if (a < 0 || b < 0) return -1;
#if defined(__GNUC__) || defined(__clang__)
    Py_ssize_t r;
    return __builtin_mul_overflow(a, b, &r) ? -1 : r;
#else
    return (b != 0 && a > PY_SSIZE_T_MAX / b) ? -1 : a * b;
#endif
}

/* A contiguous buffer of exactly `bytes` bytes (writable when asked), recorded for release. After a failure
 * (Python error set) this and every later call return NULL, so a wrapper asks for all its buffers in a row and
 * checks `b.failed` once. */
static void *get(Buffers *b, PyObject *obj, Py_ssize_t bytes, int writable, const char *what) {
    if (b->failed) return NULL;
    if (bytes < 0) {
        PyErr_Format(PyExc_ValueError, "%s: sizes out of range (negative or overflowing)", what);
        b->failed = 1;
        return NULL;
    }
    if (b->n == (int)(sizeof b->views / sizeof b->views[0])) {
        PyErr_SetString(PyExc_RuntimeError, "too many buffers for one call");
        b->failed = 1;
        return NULL;
    }
    Py_buffer *v = &b->views[b->n];
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, v, flags) != 0) {
        b->failed = 1;
        return NULL;
    }
    b->n++;
    if (v->len != bytes) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd bytes, got %zd", what, bytes, v->len);
        b->failed = 1;
        return NULL;
    }
    return v->buf;
}

/* ---------------------------------------------------------------------------------------------------------
 * Value noise
 * ------------------------------------------------------------------------------------------------------- */

/* noise_columns(out f32 (gy, n_out), grid f64 (gy, gx), gy, gx, xi i64 (4, n_out), xw f64 (4, n_out), weight)
 * out[r, c] = (float)(((((g[r, xi0] w0) + g[r, xi1] w1) + g[r, xi2] w2) + g[r, xi3] w3) * weight) */
static PyObject *noise_columns(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_grid, *o_xi, *o_xw;
    Py_ssize_t gy, gx, n_out;
    double weight;
    if (!PyArg_ParseTuple(args, "OOnnOOnd", &o_out, &o_grid, &gy, &gx, &o_xi, &o_xw, &n_out, &weight)) return NULL;
    Buffers b = {.n = 0, .failed = 0};
    float *out = get(&b, o_out, mul(mul(gy, n_out), 4), 1, "out");
    const double *grid = get(&b, o_grid, mul(mul(gy, gx), 8), 0, "grid");
    const int64_t *xi = get(&b, o_xi, mul(mul(4, n_out), 8), 0, "xi");
    const double *xw = get(&b, o_xw, mul(mul(4, n_out), 8), 0, "xw");
    if (b.failed) { release(&b); return NULL; }
    for (Py_ssize_t c = 0; c < n_out; c++)
        for (int k = 0; k < 4; k++)
            if (xi[k * n_out + c] < 0 || xi[k * n_out + c] >= gx) {
                release(&b);
                PyErr_SetString(PyExc_IndexError, "noise_columns: tap index out of range");
                return NULL;
            }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < gy; r++) {
        const double *g = grid + r * gx;
        float *o = out + r * n_out;
        for (Py_ssize_t c = 0; c < n_out; c++) {
            double acc = g[xi[c]] * xw[c];
            acc = acc + g[xi[n_out + c]] * xw[n_out + c];
            acc = acc + g[xi[2 * n_out + c]] * xw[2 * n_out + c];
            acc = acc + g[xi[3 * n_out + c]] * xw[3 * n_out + c];
            o[c] = (float)(acc * weight);
        }
    }
    Py_END_ALLOW_THREADS
    release(&b);
    Py_RETURN_NONE;
}

VECTORISED
static void cubic_row_run(float *restrict acc, const float *r0, const float *r1, const float *r2, const float *r3,
                          float w0, float w1, float w2, float w3, Py_ssize_t n) {
    for (Py_ssize_t c = 0; c < n; c++) {
        float blk = r0[c] * w0;
        blk = blk + r1[c] * w1;
        blk = blk + r2[c] * w2;
        blk = blk + r3[c] * w3;
        acc[c] = acc[c] + blk;
    }
}

/* noise_rows(out f32 (n_rows, n_cols), n_rows, n_cols, octaves) with octaves a sequence of
 * (rows f32 (ny, n_cols), ny, yi i64 (4, n_rows), yw f32 (4, n_rows)):
 * out[r] = sum over octaves (in order, from 0) of ((rows[yi0] w0 + rows[yi1] w1) + rows[yi2] w2) + rows[yi3] w3. */
static PyObject *noise_rows(PyObject *self, PyObject *args) {
    PyObject *o_out, *octs;
    Py_ssize_t n_rows, n_cols;
    if (!PyArg_ParseTuple(args, "OnnO", &o_out, &n_rows, &n_cols, &octs)) return NULL;
    PyObject *seq = PySequence_Fast(octs, "octaves must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t n_oct = PySequence_Fast_GET_SIZE(seq);
    if (n_oct > 3) {
        /* 1 + 3 buffers per octave must fit in Buffers; more octaves are summed in several calls. */
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "noise_rows: at most 3 octaves per call");
        return NULL;
    }
    Buffers b = {.n = 0, .failed = 0};
    float *out = get(&b, o_out, mul(mul(n_rows, n_cols), 4), 1, "out");
    const float *rows[3];
    const int64_t *yi[3];
    const float *yw[3];
    Py_ssize_t ny[3];
    for (Py_ssize_t o = 0; !b.failed && o < n_oct; o++) {
        PyObject *t = PySequence_Fast_GET_ITEM(seq, o);
        PyObject *o_rows, *o_yi, *o_yw;
        if (!PyArg_ParseTuple(t, "OnOO", &o_rows, &ny[o], &o_yi, &o_yw)) { b.failed = 1; break; }
        rows[o] = get(&b, o_rows, mul(mul(ny[o], n_cols), 4), 0, "rows");
        yi[o] = get(&b, o_yi, mul(mul(4, n_rows), 8), 0, "yi");
        yw[o] = get(&b, o_yw, mul(mul(4, n_rows), 4), 0, "yw");
        for (Py_ssize_t i = 0; !b.failed && i < 4 * n_rows; i++)
            if (yi[o][i] < 0 || yi[o][i] >= ny[o]) {
                PyErr_SetString(PyExc_IndexError, "noise_rows: tap index out of range");
                b.failed = 1;
            }
    }
    if (b.failed) { release(&b); Py_DECREF(seq); return NULL; }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n_rows; r++) {
        float *acc = out + r * n_cols;
        for (Py_ssize_t o = 0; o < n_oct; o++) {
            const float *r0 = rows[o] + yi[o][r] * n_cols, *r1 = rows[o] + yi[o][n_rows + r] * n_cols;
            const float *r2 = rows[o] + yi[o][2 * n_rows + r] * n_cols, *r3 = rows[o] + yi[o][3 * n_rows + r] * n_cols;
            const float w0 = yw[o][r], w1 = yw[o][n_rows + r], w2 = yw[o][2 * n_rows + r], w3 = yw[o][3 * n_rows + r];
            cubic_row_run(acc, r0, r1, r2, r3, w0, w1, w2, w3, n_cols);
        }
    }
    Py_END_ALLOW_THREADS
    release(&b);
    Py_DECREF(seq);
    Py_RETURN_NONE;
}

/* Callers pass values whose result lies in [0, 65536) (the NumPy cast is only defined there); the clamp keeps
 * the conversion defined anyway without changing any in-range result. */
VECTORISED
static void quantize_f32_run(uint16_t *out, const float *src, Py_ssize_t n, double scale, double offset) {
    for (Py_ssize_t i = 0; i < n; i++) {
        double v = (double)src[i];
        if (offset != 0.0) v = v - offset;
        v = v * scale;
        v = v + 0.5;
        v = v < 0.0 ? 0.0 : v;
        v = v > 65535.0 ? 65535.0 : v;
        out[i] = (uint16_t)(int32_t)v;
    }
}

VECTORISED
static void quantize_f64_run(uint16_t *out, const double *src, Py_ssize_t n, double scale, double offset) {
    for (Py_ssize_t i = 0; i < n; i++) {
        double v = src[i];
        if (offset != 0.0) v = v - offset;
        v = v * scale;
        v = v + 0.5;
        v = v < 0.0 ? 0.0 : v;
        v = v > 65535.0 ? 65535.0 : v;
        out[i] = (uint16_t)(int32_t)v;
    }
}

/* quantize_u16(out u16, src f32|f64, n, is_f64, scale, offset): floor(((double)v - offset) * scale + 0.5). */
static PyObject *quantize_u16(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_src;
    Py_ssize_t n;
    int is_f64;
    double scale, offset;
    if (!PyArg_ParseTuple(args, "OOnpdd", &o_out, &o_src, &n, &is_f64, &scale, &offset)) return NULL;
    Buffers b = {.n = 0, .failed = 0};
    uint16_t *out = get(&b, o_out, mul(n, 2), 1, "out");
    const void *src = get(&b, o_src, mul(n, (is_f64 ? 8 : 4)), 0, "src");
    if (b.failed) { release(&b); return NULL; }
    Py_BEGIN_ALLOW_THREADS
    if (is_f64) quantize_f64_run(out, (const double *)src, n, scale, offset);
    else quantize_f32_run(out, (const float *)src, n, scale, offset);
    Py_END_ALLOW_THREADS
    release(&b);
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------------------------------------------------
 * Per-pixel blends (n pixels of interleaved RGB; per-channel constants as 3 float32)
 *
 * Pixels are processed in chunks of CHUNK: per-pixel table reads are gathered first into per-element arrays
 * (repeated over the three channels), then one loop over the chunk's 3*CHUNK elements does the arithmetic
 * with per-channel constants tiled over the chunk, so the compiler can vectorise it (same operations per
 * element either way).
 * ------------------------------------------------------------------------------------------------------- */
#define CHUNK 1024
#define ECHUNK (3 * CHUNK)


static void tile3(float *row, const float *c3) {
    for (int i = 0; i < ECHUNK; i++) row[i] = c3[i % 3];
}

VECTORISED
static void to_u8_run(uint8_t *out, const float *x, Py_ssize_t m, int clip) {
    for (Py_ssize_t i = 0; i < m; i++) {
        float y = x[i] * 255.0f;
        y = y + 0.5f;
        if (clip) {
            y = y < 0.0f ? 0.0f : y;
            y = y > 255.0f ? 255.0f : y;
        }
        out[i] = (uint8_t)(int32_t)y;
    }
}

VECTORISED
static void unit_run(float *x, const uint8_t *v, Py_ssize_t m) {
    for (Py_ssize_t i = 0; i < m; i++) x[i] = (float)v[i] * (float)(1.0 / 255.0);
}

VECTORISED
static void haze_run(float *x, const float *t3, const float *air, const float *gain, const float *g3, Py_ssize_t m) {
    if (gain)
        for (Py_ssize_t i = 0; i < m; i++) {
            float v = x[i] * gain[i];
            v = v < 0.0f ? 0.0f : v;
            x[i] = v > 1.0f ? 1.0f : v;
        }
    for (Py_ssize_t i = 0; i < m; i++) {
        float v = x[i] - air[i];
        v = v * t3[i];
        x[i] = v + air[i];
    }
    if (g3)
        for (Py_ssize_t i = 0; i < m; i++) x[i] = x[i] + g3[i];
}

/* haze(out, img, n, density u16, t_table f32[65536], airlight f32[3], gains f32[3] or None,
 *      grain u16 or None, grain_table f32[65536] or None)
 * x = unit(I); [x = clip01(x * gain)]; x = ((x - A) * t) + A; [x = x + grain]; to_u8(x). */
static PyObject *haze(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_img, *o_den, *o_tt, *o_air, *o_gain, *o_gr, *o_gt;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOnOOOOOO", &o_out, &o_img, &n, &o_den, &o_tt, &o_air, &o_gain, &o_gr, &o_gt))
        return NULL;
    Buffers b = {.n = 0, .failed = 0};
    uint8_t *out = get(&b, o_out, mul(3, n), 1, "out");
    const uint8_t *img = get(&b, o_img, mul(3, n), 0, "img");
    const uint16_t *den = get(&b, o_den, mul(2, n), 0, "density");
    const float *tt = get(&b, o_tt, mul(65536, 4), 0, "t_table");
    const float *air = get(&b, o_air, 12, 0, "airlight");
    const float *gain = NULL;
    const uint16_t *gr = NULL;
    const float *gt = NULL;
    if (o_gain != Py_None) gain = get(&b, o_gain, 12, 0, "gains");
    if (o_gr != Py_None) {
        gr = get(&b, o_gr, mul(2, n), 0, "grain");
        gt = get(&b, o_gt, mul(65536, 4), 0, "grain_table");
    }
    if (b.failed) { release(&b); return NULL; }
    Py_BEGIN_ALLOW_THREADS
    float air_row[ECHUNK], gain_row[ECHUNK], x[ECHUNK], t3[ECHUNK], g3[ECHUNK];
    tile3(air_row, air);
    if (gain) tile3(gain_row, gain);
    for (Py_ssize_t p0 = 0; p0 < n; p0 += CHUNK) {
        const Py_ssize_t k = n - p0 < CHUNK ? n - p0 : CHUNK, m = 3 * k;
        for (Py_ssize_t p = 0; p < k; p++) {
            t3[3 * p] = t3[3 * p + 1] = t3[3 * p + 2] = tt[den[p0 + p]];
            if (gr) g3[3 * p] = g3[3 * p + 1] = g3[3 * p + 2] = gt[gr[p0 + p]];
        }
        unit_run(x, img + 3 * p0, m);
        haze_run(x, t3, air_row, gain ? gain_row : NULL, gr ? g3 : NULL, m);
        to_u8_run(out + 3 * p0, x, m, 1);
    }
    Py_END_ALLOW_THREADS
    release(&b);
    Py_RETURN_NONE;
}

/* sat(I, s) = clip01(Y + s (I - Y)) with Y = (x0 L0 + x1 L1) + x2 L2, as ((x - Y) * s) + Y, on k pixels. */
VECTORISED
static void saturate_run(float *x, float *y3, const float *luma, float s, Py_ssize_t k) {
    for (Py_ssize_t p = 0; p < k; p++) {
        const float y = (x[3 * p] * luma[0] + x[3 * p + 1] * luma[1]) + x[3 * p + 2] * luma[2];
        y3[3 * p] = y3[3 * p + 1] = y3[3 * p + 2] = y;
    }
    for (Py_ssize_t i = 0; i < 3 * k; i++) {
        float v = x[i] - y3[i];
        v = v * s;
        v = v + y3[i];
        v = v < 0.0f ? 0.0f : v;
        x[i] = v > 1.0f ? 1.0f : v;
    }
}

VECTORISED
static void scale_offset_run(float *x, float scale, const float *off, Py_ssize_t m) {
    for (Py_ssize_t i = 0; i < m; i++) {
        float v = x[i] * scale;
        x[i] = v + off[i];
    }
}

/* turbidity(out, img, n, scale f32, offset f32[3], luma f32[3], saturation f32) */
static PyObject *turbidity(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_img, *o_off, *o_luma;
    Py_ssize_t n;
    float scale, sat;
    if (!PyArg_ParseTuple(args, "OOnfOOf", &o_out, &o_img, &n, &scale, &o_off, &o_luma, &sat)) return NULL;
    Buffers b = {.n = 0, .failed = 0};
    uint8_t *out = get(&b, o_out, mul(3, n), 1, "out");
    const uint8_t *img = get(&b, o_img, mul(3, n), 0, "img");
    const float *off = get(&b, o_off, 12, 0, "offset");
    const float *luma = get(&b, o_luma, 12, 0, "luma");
    if (b.failed) { release(&b); return NULL; }
    Py_BEGIN_ALLOW_THREADS
    float off_row[ECHUNK], x[ECHUNK], y3[ECHUNK];
    tile3(off_row, off);
    for (Py_ssize_t p0 = 0; p0 < n; p0 += CHUNK) {
        const Py_ssize_t k = n - p0 < CHUNK ? n - p0 : CHUNK, m = 3 * k;
        unit_run(x, img + 3 * p0, m);
        scale_offset_run(x, scale, off_row, m);
        saturate_run(x, y3, luma, sat, k);
        to_u8_run(out + 3 * p0, x, m, 1);
    }
    Py_END_ALLOW_THREADS
    release(&b);
    Py_RETURN_NONE;
}

VECTORISED
static void screen_run(float *x, const float *g3, const float *tint, Py_ssize_t m) {
    for (Py_ssize_t i = 0; i < m; i++) {
        const float layer = g3[i] * tint[i];
        x[i] = 1.0f - (1.0f - x[i]) * (1.0f - layer);
    }
}

/* glare(out, img, n, bloom u16, bloom_table f32[65536], cores u8 (0/1), tint f32[3])
 * g = min(table[bloom] + cores, 1); L = g * tint; out = 1 - (1 - x)(1 - L). */
static PyObject *glare(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_img, *o_bl, *o_bt, *o_cores, *o_tint;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOnOOOO", &o_out, &o_img, &n, &o_bl, &o_bt, &o_cores, &o_tint)) return NULL;
    Buffers b = {.n = 0, .failed = 0};
    uint8_t *out = get(&b, o_out, mul(3, n), 1, "out");
    const uint8_t *img = get(&b, o_img, mul(3, n), 0, "img");
    const uint16_t *bl = get(&b, o_bl, mul(2, n), 0, "bloom");
    const float *bt = get(&b, o_bt, mul(65536, 4), 0, "bloom_table");
    const uint8_t *cores = get(&b, o_cores, n, 0, "cores");
    const float *tint = get(&b, o_tint, 12, 0, "tint");
    if (b.failed) { release(&b); return NULL; }
    Py_BEGIN_ALLOW_THREADS
    float tint_row[ECHUNK], x[ECHUNK], g3[ECHUNK];
    tile3(tint_row, tint);
    for (Py_ssize_t p0 = 0; p0 < n; p0 += CHUNK) {
        const Py_ssize_t k = n - p0 < CHUNK ? n - p0 : CHUNK, m = 3 * k;
        for (Py_ssize_t p = 0; p < k; p++) {
            float g = bt[bl[p0 + p]] + (float)cores[p0 + p];
            g = g < 1.0f ? g : 1.0f;
            g3[3 * p] = g3[3 * p + 1] = g3[3 * p + 2] = g;
        }
        unit_run(x, img + 3 * p0, m);
        screen_run(x, g3, tint_row, m);
        to_u8_run(out + 3 * p0, x, m, 1);
    }
    Py_END_ALLOW_THREADS
    release(&b);
    Py_RETURN_NONE;
}

VECTORISED
static void wet_run(float *w, const float *tone, float keep, Py_ssize_t m) {
    for (Py_ssize_t i = 0; i < m; i++) {
        float v = w[i] * keep;
        w[i] = v + tone[i];
    }
}

VECTORISED
static void mix_run(float *w, const float *x, const float *m3, Py_ssize_t m) {
    for (Py_ssize_t i = 0; i < m; i++) {
        float v = w[i] - x[i];
        v = v * m3[i];
        w[i] = v + x[i];
    }
}

/* inundation(out, img, rippled, n, mask u16, sparkle u8 (0/1), keep f32, tone f32[3], strength f32, clip)
 * W = unit(R) keep + tone; [W = 1 - (1 - W)(1 - strength) at sparkles]; m = mask / 65535 (float32 division);
 * out = to_u8(((W - I) m) + I). */
static PyObject *inundation(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_img, *o_rip, *o_mask, *o_sp, *o_tone;
    Py_ssize_t n;
    float keep, strength;
    int clip;
    if (!PyArg_ParseTuple(args, "OOOnOOfOfp", &o_out, &o_img, &o_rip, &n, &o_mask, &o_sp, &keep, &o_tone, &strength,
                          &clip))
        return NULL;
    Buffers b = {.n = 0, .failed = 0};
    uint8_t *out = get(&b, o_out, mul(3, n), 1, "out");
    const uint8_t *img = get(&b, o_img, mul(3, n), 0, "img");
    const uint8_t *rip = get(&b, o_rip, mul(3, n), 0, "rippled");
    const uint16_t *mask = get(&b, o_mask, mul(2, n), 0, "mask");
    const uint8_t *sp = get(&b, o_sp, n, 0, "sparkle");
    const float *tone = get(&b, o_tone, 12, 0, "tone");
    if (b.failed) { release(&b); return NULL; }
    const float one_minus_strength = 1.0f - strength;
    Py_BEGIN_ALLOW_THREADS
    float tone_row[ECHUNK], x[ECHUNK], w[ECHUNK], m3[ECHUNK];
    tile3(tone_row, tone);
    for (Py_ssize_t p0 = 0; p0 < n; p0 += CHUNK) {
        const Py_ssize_t k = n - p0 < CHUNK ? n - p0 : CHUNK, m = 3 * k;
        for (Py_ssize_t p = 0; p < k; p++) m3[3 * p] = m3[3 * p + 1] = m3[3 * p + 2] = (float)mask[p0 + p] / 65535.0f;
        unit_run(x, img + 3 * p0, m);
        unit_run(w, rip + 3 * p0, m);
        wet_run(w, tone_row, keep, m);
        for (Py_ssize_t p = 0; p < k; p++)
            if (sp[p0 + p])
                for (int c = 0; c < 3; c++) w[3 * p + c] = 1.0f - (1.0f - w[3 * p + c]) * one_minus_strength;
        mix_run(w, x, m3, m);
        to_u8_run(out + 3 * p0, w, m, clip);
    }
    Py_END_ALLOW_THREADS
    release(&b);
    Py_RETURN_NONE;
}

VECTORISED
static void rain_run(float *x, const float *keep3, Py_ssize_t m) {
    for (Py_ssize_t i = 0; i < m; i++) {
        float v = 1.0f - x[i];
        v = v * keep3[i];
        x[i] = 1.0f - v;
    }
}

VECTORISED
static void scale_run(float *x, float s, Py_ssize_t m) {
    for (Py_ssize_t i = 0; i < m; i++) x[i] = x[i] * s;
}

/* rain(out, veil u8 or f32, n, veil_is_f32, layer f32, brightness f32, luma f32[3], saturation f32)
 * V = sat(unit(B) * brightness); out = to_u8(1 - (1 - V)(1 - L)). */
static PyObject *rain(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_veil, *o_layer, *o_luma;
    Py_ssize_t n;
    int veil_f32;
    float bright, sat;
    if (!PyArg_ParseTuple(args, "OOnpOfOf", &o_out, &o_veil, &n, &veil_f32, &o_layer, &bright, &o_luma, &sat))
        return NULL;
    Buffers b = {.n = 0, .failed = 0};
    uint8_t *out = get(&b, o_out, mul(3, n), 1, "out");
    const void *veil = get(&b, o_veil, mul(mul(3, n), (veil_f32 ? 4 : 1)), 0, "veil");
    const float *layer = get(&b, o_layer, mul(4, n), 0, "layer");
    const float *luma = get(&b, o_luma, 12, 0, "luma");
    if (b.failed) { release(&b); return NULL; }
    Py_BEGIN_ALLOW_THREADS
    float x[ECHUNK], y3[ECHUNK], keep3[ECHUNK];
    for (Py_ssize_t p0 = 0; p0 < n; p0 += CHUNK) {
        const Py_ssize_t k = n - p0 < CHUNK ? n - p0 : CHUNK, m = 3 * k;
        if (veil_f32)
            memcpy(x, (const float *)veil + 3 * p0, (size_t)m * sizeof(float));
        else
            unit_run(x, (const uint8_t *)veil + 3 * p0, m);
        scale_run(x, bright, m);
        saturate_run(x, y3, luma, sat, k);
        for (Py_ssize_t p = 0; p < k; p++) keep3[3 * p] = keep3[3 * p + 1] = keep3[3 * p + 2] = 1.0f - layer[p0 + p];
        rain_run(x, keep3, m);
        to_u8_run(out + 3 * p0, x, m, 1);
    }
    Py_END_ALLOW_THREADS
    release(&b);
    Py_RETURN_NONE;
}

VECTORISED
static void low_light_run(float *x, const float *sd3, const float *dark3, float fgrid, int32_t *q, Py_ssize_t m) {
    for (Py_ssize_t i = 0; i < m; i++) {
        float v = x[i] * sd3[i];
        v = v + dark3[i];
        v = v + 0.5f;
        v = v < 0.0f ? 0.0f : v;
        v = v > fgrid ? fgrid : v;
        q[i] = (int32_t)v;
    }
}

/* low_light(out, img, n, noise u16 (n, 3), table f32[65536], sd f32[256*3], dark f32[256*3], enc u8[grid + 1], grid)
 * x = table[noise] * sd[I, c] + dark[I, c] + 0.5, clipped to [0, grid]; out = enc[(int32)x]. */
static PyObject *low_light(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_img, *o_noise, *o_tab, *o_sd, *o_dark, *o_enc;
    Py_ssize_t n, grid;
    if (!PyArg_ParseTuple(args, "OOnOOOOOn", &o_out, &o_img, &n, &o_noise, &o_tab, &o_sd, &o_dark, &o_enc, &grid))
        return NULL;
    Buffers b = {.n = 0, .failed = 0};
    uint8_t *out = get(&b, o_out, mul(3, n), 1, "out");
    const uint8_t *img = get(&b, o_img, mul(3, n), 0, "img");
    const uint16_t *noise = get(&b, o_noise, mul(6, n), 0, "noise");
    const float *tab = get(&b, o_tab, mul(65536, 4), 0, "table");
    const float *sd = get(&b, o_sd, mul(mul(256, 3), 4), 0, "sd");
    const float *dark = get(&b, o_dark, mul(mul(256, 3), 4), 0, "dark");
    const uint8_t *enc = get(&b, o_enc, grid + 1, 0, "enc");
    if (b.failed) { release(&b); return NULL; }
    const float fgrid = (float)grid;
    Py_BEGIN_ALLOW_THREADS
    float x[ECHUNK], sd3[ECHUNK], dark3[ECHUNK];
    int32_t q[ECHUNK];
    for (Py_ssize_t p0 = 0; p0 < n; p0 += CHUNK) {
        const Py_ssize_t k = n - p0 < CHUNK ? n - p0 : CHUNK, m = 3 * k;
        const uint8_t *iv = img + 3 * p0;
        const uint16_t *nv = noise + 3 * p0;
        for (Py_ssize_t p = 0; p < k; p++)
            for (int c = 0; c < 3; c++) {
                const Py_ssize_t i = 3 * p + c;
                x[i] = tab[nv[i]];
                sd3[i] = sd[3 * iv[i] + c];
                dark3[i] = dark[3 * iv[i] + c];
            }
        low_light_run(x, sd3, dark3, fgrid, q, m);
        for (Py_ssize_t i = 0; i < m; i++) out[3 * p0 + i] = enc[q[i]];
    }
    Py_END_ALLOW_THREADS
    release(&b);
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------------------------------------------------
 * Exact separable convolution (integer-valued data, integer kernel, BORDER_REFLECT)
 * ------------------------------------------------------------------------------------------------------- */

/* OpenCV's borderInterpolate for BORDER_REFLECT (fedcba|abcdefgh|hgfedcb), repeated for reaches beyond the
 * size, so results match cv2.sepFilter2D's border handling for any kernel radius. Repeated mirroring is periodic
 * with period 2 len (mirror at -1/2, then at len - 1/2), so the index is found in constant time: a block sum
 * whose blocks are far larger than the frame would otherwise mirror step by step for every pixel it reads. */
static Py_ssize_t reflect_index(Py_ssize_t p, Py_ssize_t len) {
    if (len == 1) return 0;
    if (p >= 0 && p < len) return p;
    const Py_ssize_t period = 2 * len;
    Py_ssize_t q = p % period;
    if (q < 0) q += period;
    return q < len ? q : period - 1 - q;
}

VECTORISED
static void taps_run(double *restrict acc, const double *restrict src, const double *k, Py_ssize_t nk, Py_ssize_t stride,
                     Py_ssize_t m, int symmetric) {
    /* acc[i] = sum_j k[j] src[i + j*stride]: every product and partial sum is an integer below 2**53, so the
     * order of the sum (here tap by tap over a vector of outputs, mirrored taps added first when the kernel is
     * symmetric) cannot change the result. */
    for (Py_ssize_t i = 0; i < m; i++) acc[i] = 0.0;
    const Py_ssize_t pairs = symmetric ? nk / 2 : 0;
    for (Py_ssize_t j = 0; j < pairs; j++) {
        const double kj = k[j];
        const double *a = src + j * stride, *b = src + (nk - 1 - j) * stride;
        for (Py_ssize_t i = 0; i < m; i++) acc[i] = acc[i] + kj * (a[i] + b[i]);
    }
    for (Py_ssize_t j = pairs; j < nk - pairs; j++) {
        const double kj = k[j];
        const double *s = src + j * stride;
        for (Py_ssize_t i = 0; i < m; i++) acc[i] = acc[i] + kj * s[i];
    }
}

VECTORISED
static void col_pair_run(double *restrict acc, const double *a, const double *b, double kj, Py_ssize_t m) {
    for (Py_ssize_t i = 0; i < m; i++) acc[i] = acc[i] + kj * (a[i] + b[i]);
}

VECTORISED
static void u8_to_f64_run(double *d, const uint8_t *s, Py_ssize_t m) {
    for (Py_ssize_t i = 0; i < m; i++) d[i] = (double)s[i];
}

VECTORISED
static void i64_to_f64_run(double *d, const int64_t *s, Py_ssize_t m) {
    for (Py_ssize_t i = 0; i < m; i++) d[i] = (double)s[i];
}

VECTORISED
static void col_tap_run(double *restrict acc, const double *restrict s, double kj, Py_ssize_t m) {
    for (Py_ssize_t i = 0; i < m; i++) acc[i] = acc[i] + kj * s[i];
}

VECTORISED
static void store_run(void *out, int out_kind, const double *acc, double scale, Py_ssize_t m) {
    /* 0: the exact sums (float64); 1: (float)(sum * scale); 2: (float)min(sum * scale, 1.0). */
    if (out_kind == 0) {
        memcpy(out, acc, (size_t)m * sizeof(double));
    } else if (out_kind == 1) {
        float *o = out;
        for (Py_ssize_t i = 0; i < m; i++) o[i] = (float)(acc[i] * scale);
    } else {
        float *o = out;
        for (Py_ssize_t i = 0; i < m; i++) {
            const double v = acc[i] * scale;
            o[i] = (float)(v < 1.0 ? v : 1.0);
        }
    }
}

/* convolve(out, src (h, w, ch) of kind 0 = uint8, 1 = int64, 2 = float64 (integer values), h, w, ch,
 *          kernel f64 (nk, odd), out_kind, scale): the separable correlation with the centred kernel, reflect
 * border, stored as store_run says. Row-pass results are kept for the nk source rows the current output row
 * needs (a ring indexed by source row mod nk: those rows always form a contiguous range of at most nk rows). */
static PyObject *convolve(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_src, *o_k;
    Py_ssize_t h, w, ch, nk;
    int kind, out_kind;
    double scale;
    if (!PyArg_ParseTuple(args, "OOinnnOnid", &o_out, &o_src, &kind, &h, &w, &ch, &o_k, &nk, &out_kind, &scale))
        return NULL;
    if (kind < 0 || kind > 2 || out_kind < 0 || out_kind > 2 || nk < 1 || nk % 2 == 0 || h < 1 || w < 1 || ch < 1) {
        PyErr_SetString(PyExc_ValueError, "convolve: bad arguments");
        return NULL;
    }
    static const int size[3] = {1, 8, 8};
    Buffers b = {.n = 0, .failed = 0};
    void *out = get(&b, o_out, mul(mul(mul(h, w), ch), (out_kind == 0 ? 8 : 4)), 1, "out");
    const void *src = get(&b, o_src, mul(mul(mul(h, w), ch), size[kind]), 0, "src");
    const double *k = get(&b, o_k, mul(nk, 8), 0, "kernel");
    if (b.failed) { release(&b); return NULL; }
    const Py_ssize_t r = nk / 2, row = w * ch, prow = (w + 2 * r) * ch;
    double *ring = PyMem_RawMalloc((size_t)(nk * row) * sizeof(double));
    double *pad = PyMem_RawMalloc((size_t)prow * sizeof(double));
    double *acc = PyMem_RawMalloc((size_t)row * sizeof(double));
    Py_ssize_t *tag = PyMem_RawMalloc((size_t)nk * sizeof(Py_ssize_t));
    const double **win = (const double **)PyMem_RawMalloc((size_t)nk * sizeof(double *));
    if (!ring || !pad || !acc || !tag || !win) {
        PyMem_RawFree(ring); PyMem_RawFree(pad); PyMem_RawFree(acc); PyMem_RawFree(tag); PyMem_RawFree((void *)win);
        release(&b);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < nk; i++) tag[i] = -1;
    int symmetric = 1;
    for (Py_ssize_t j = 0; j < nk / 2; j++) symmetric &= k[j] == k[nk - 1 - j];
    for (Py_ssize_t y = 0; y < h; y++) {
        for (Py_ssize_t j = 0; j < nk; j++) {
            const Py_ssize_t sy = reflect_index(y + j - r, h), slot = sy % nk;
            double *rp = ring + slot * row;
            if (tag[slot] != sy) {
                /* Row pass of source row sy: converted to doubles (exact) into the middle of the padded
                 * buffer, the r pixels beyond each end copied from their reflected positions, then the taps. */
                double *mid = pad + r * ch;
                const Py_ssize_t i0 = sy * row;
                if (kind == 0) u8_to_f64_run(mid, (const uint8_t *)src + i0, row);
                else if (kind == 1) i64_to_f64_run(mid, (const int64_t *)src + i0, row);
                else memcpy(mid, (const double *)src + i0, (size_t)row * sizeof(double));
                for (Py_ssize_t x = 0; x < r; x++) {
                    const Py_ssize_t left = reflect_index(x - r, w), right = reflect_index(w + x, w);
                    for (Py_ssize_t c = 0; c < ch; c++) {
                        pad[x * ch + c] = mid[left * ch + c];
                        pad[(w + r + x) * ch + c] = mid[right * ch + c];
                    }
                }
                taps_run(rp, pad, k, nk, ch, row, symmetric);
                tag[slot] = sy;
            }
            win[j] = rp;
        }
        for (Py_ssize_t i = 0; i < row; i++) acc[i] = 0.0;
        const Py_ssize_t pairs = symmetric ? nk / 2 : 0;
        for (Py_ssize_t j = 0; j < pairs; j++) col_pair_run(acc, win[j], win[nk - 1 - j], k[j], row);
        for (Py_ssize_t j = pairs; j < nk - pairs; j++) col_tap_run(acc, win[j], k[j], row);
        store_run((char *)out + y * row * (out_kind == 0 ? 8 : 4), out_kind, acc, scale, row);
    }
    Py_END_ALLOW_THREADS
    PyMem_RawFree((void *)win);
    PyMem_RawFree(ring); PyMem_RawFree(pad); PyMem_RawFree(acc); PyMem_RawFree(tag);
    release(&b);
    Py_RETURN_NONE;
}

/* block_sum(out i64 (hb, wb), mask u8 (h, w), h, w, f): sums over f x f blocks, the frame extended to whole
 * blocks by mirroring (numpy.pad mode "symmetric", which is reflect_index's rule). Integers: exact. */
static PyObject *block_sum(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_mask;
    Py_ssize_t h, w, f;
    if (!PyArg_ParseTuple(args, "OOnnn", &o_out, &o_mask, &h, &w, &f)) return NULL;
    /* Mirroring repeats for f above a side (a blur far wider than a small frame, as object scale gives at a large
     * person unit). The work is the padded area (hb f)(wb f) and the column buffer wb f; the engine's render
     * budget (aegis_data/engine/budget.py) bounds both before any call, and here they must merely not overflow. */
    if (h < 1 || w < 1 || f < 1 || h > PY_SSIZE_T_MAX - f || w > PY_SSIZE_T_MAX - f) {
        PyErr_SetString(PyExc_ValueError, "block_sum: bad arguments (sizes and factor must be positive)");
        return NULL;
    }
    const Py_ssize_t hb = (h + f - 1) / f, wb = (w + f - 1) / f;
    if (mul(mul(hb, f), mul(wb, f)) < 0) {
        PyErr_SetString(PyExc_ValueError, "block_sum: the padded area overflows");
        return NULL;
    }
    Buffers b = {.n = 0, .failed = 0};
    int64_t *out = get(&b, o_out, mul(mul(hb, wb), 8), 1, "out");
    const uint8_t *mask = get(&b, o_mask, mul(h, w), 0, "mask");
    if (b.failed) { release(&b); return NULL; }
    int64_t *colsum = PyMem_RawMalloc((size_t)(wb * f) * sizeof(int64_t));
    if (!colsum) { release(&b); return PyErr_NoMemory(); }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t by = 0; by < hb; by++) {
        for (Py_ssize_t x = 0; x < wb * f; x++) colsum[x] = 0;
        for (Py_ssize_t dy = 0; dy < f; dy++) {
            const uint8_t *m = mask + reflect_index(by * f + dy, h) * w;
            for (Py_ssize_t x = 0; x < w; x++) colsum[x] += m[x];
            for (Py_ssize_t x = w; x < wb * f; x++) colsum[x] += m[reflect_index(x, w)];
        }
        for (Py_ssize_t bx = 0; bx < wb; bx++) {
            int64_t t = 0;
            for (Py_ssize_t dx = 0; dx < f; dx++) t += colsum[bx * f + dx];
            out[by * wb + bx] = t;
        }
    }
    Py_END_ALLOW_THREADS
    PyMem_RawFree(colsum);
    release(&b);
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------------------------------------------------
 * Motion blur: shear and unshear of _shear_box (integers only)
 * ------------------------------------------------------------------------------------------------------- */

/* shear(sheared u8 (n, wide, 3), padded u8 (hp, wp, 3), hp, wp, r0, e i64 (n), n, span): row v of the sheared
 * band is zeros with padded row r0 + v copied to columns span - e[v] .. span - e[v] + wp - 1 (wide = wp + span). */
static PyObject *shear(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_pad, *o_e;
    Py_ssize_t hp, wp, r0, n, span;
    if (!PyArg_ParseTuple(args, "OOnnnOnn", &o_out, &o_pad, &hp, &wp, &r0, &o_e, &n, &span)) return NULL;
    const Py_ssize_t wide = wp + span;
    Buffers b = {.n = 0, .failed = 0};
    uint8_t *out = get(&b, o_out, mul(mul(n, wide), 3), 1, "sheared");
    const uint8_t *pad = get(&b, o_pad, mul(mul(hp, wp), 3), 0, "padded");
    const int64_t *e = get(&b, o_e, mul(n, 8), 0, "e");
    if (b.failed) { release(&b); return NULL; }
    for (Py_ssize_t v = 0; v < n; v++)
        if (e[v] < 0 || e[v] > span || r0 + v < 0 || r0 + v >= hp) {
            release(&b);
            PyErr_SetString(PyExc_IndexError, "shear: shift or row out of range");
            return NULL;
        }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t v = 0; v < n; v++) {
        uint8_t *row = out + v * wide * 3;
        const Py_ssize_t left = span - e[v];
        memset(row, 0, (size_t)(wide * 3));
        memcpy(row + left * 3, pad + (r0 + v) * wp * 3, (size_t)(wp * 3));
    }
    Py_END_ALLOW_THREADS
    release(&b);
    Py_RETURN_NONE;
}

VECTORISED
static void unshear_run(uint8_t *restrict o, const uint16_t *mid, const uint16_t *lft, const uint16_t *rgt, uint32_t wm,
                        uint32_t wl, uint32_t wr, uint32_t bias, uint32_t div, Py_ssize_t m) {
    for (Py_ssize_t i = 0; i < m; i++) {
        uint32_t acc = (uint32_t)mid[i] * wm;
        acc += (uint32_t)lft[i] * wl;
        acc += (uint32_t)rgt[i] * wr;
        acc += bias;
        o[i] = (uint8_t)(acc / div);
    }
}

/* The same for 32-bit box sums (lines longer than 257 px, whose sums of up to 255 per pixel pass 65535). */
VECTORISED
static void unshear32_run(uint8_t *restrict o, const uint32_t *mid, const uint32_t *lft, const uint32_t *rgt,
                          uint32_t wm, uint32_t wl, uint32_t wr, uint32_t bias, uint32_t div, Py_ssize_t m) {
    for (Py_ssize_t i = 0; i < m; i++) {
        uint32_t acc = mid[i] * wm;
        acc += lft[i] * wl;
        acc += rgt[i] * wr;
        acc += bias;
        o[i] = (uint8_t)(acc / div);
    }
}

/* unshear(out u8 (h, w, 3), h, w, sums u16 (n, wide, 3), n, wide, r0, r1, r, start i64 (r1 - r0),
 *         w_mid, w_left, w_right u32 (h), length[, sum_bytes]): output row y = r0 + i reads the box sums of
 * sheared row i + r at columns start[i] + x (weight w_mid), one to the left (w_left) and one to the right
 * (w_right), adds 32 L and divides by 64 L (integer floor). sum_bytes: 2 (uint16 sums, the default) or 4 (uint32
 * sums). A sum is at most 255 L and the weights add to 64, so 64 * 255 L + 32 L stays below 2**32 for L <= 65535:
 * no uint32 step wraps. */
static PyObject *unshear(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_sums, *o_start, *o_wm, *o_wl, *o_wr;
    Py_ssize_t h, w, n, wide, r0, r1, r, length, sum_bytes = 2;
    if (!PyArg_ParseTuple(args, "OnnOnnnnnOOOOn|n", &o_out, &h, &w, &o_sums, &n, &wide, &r0, &r1, &r, &o_start, &o_wm,
                          &o_wl, &o_wr, &length, &sum_bytes))
        return NULL;
    if (r0 < 0 || r1 > h || r1 < r0 || r1 - r0 + 2 * r > n || length < 1 || length > 65535 ||
        (sum_bytes != 2 && sum_bytes != 4)) {
        PyErr_SetString(PyExc_ValueError, "unshear: bad arguments");
        return NULL;
    }
    Buffers b = {.n = 0, .failed = 0};
    uint8_t *out = get(&b, o_out, mul(mul(h, w), 3), 1, "out");
    const void *sums = get(&b, o_sums, mul(mul(mul(n, wide), 3), sum_bytes), 0, "sums");
    const int64_t *start = get(&b, o_start, mul((r1 - r0), 8), 0, "start");
    const uint32_t *wm = get(&b, o_wm, mul(h, 4), 0, "w_mid");
    const uint32_t *wl = get(&b, o_wl, mul(h, 4), 0, "w_left");
    const uint32_t *wr = get(&b, o_wr, mul(h, 4), 0, "w_right");
    if (b.failed) { release(&b); return NULL; }
    for (Py_ssize_t i = 0; i < r1 - r0; i++)
        if (start[i] < 1 || start[i] + 1 + w > wide) {
            release(&b);
            PyErr_SetString(PyExc_IndexError, "unshear: column out of range");
            return NULL;
        }
    const uint32_t bias = 32u * (uint32_t)length, div = 64u * (uint32_t)length;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < r1 - r0; i++) {
        const Py_ssize_t y = r0 + i;
        const Py_ssize_t at = (i + r) * wide * 3 + start[i] * 3;
        if (sum_bytes == 4) {
            const uint32_t *src = (const uint32_t *)sums + at;
            unshear32_run(out + y * w * 3, src, src - 3, src + 3, wm[y], wl[y], wr[y], bias, div, w * 3);
        } else {
            const uint16_t *src = (const uint16_t *)sums + at;
            unshear_run(out + y * w * 3, src, src - 3, src + 3, wm[y], wl[y], wr[y], bias, div, w * 3);
        }
    }
    Py_END_ALLOW_THREADS
    release(&b);
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------------------------------------------------
 * Rain streak rasterisation
 * ------------------------------------------------------------------------------------------------------- */

/* streaks(layer f64 (h*w), h, w, n, first i64, counts i64, steep u8, major_c, minor_c, slope, lo, hi,
 *         intensity (f64 each)): every step m = first .. first + count - 1 of every streak, in float64 as
 * rasterize_streaks writes it, adds floor(weight (1 - frac) 4096 + 0.5) and floor(weight frac 4096 + 0.5) to
 * the two pixels straddling the line. The added values are integers and their sums stay below 2**53, so the
 * order of accumulation cannot change the layer. */
static PyObject *streaks(PyObject *self, PyObject *args) {
    PyObject *o_layer, *o_first, *o_counts, *o_steep, *o_maj, *o_min, *o_slope, *o_lo, *o_hi, *o_int;
    Py_ssize_t h, w, n;
    if (!PyArg_ParseTuple(args, "OnnnOOOOOOOOO", &o_layer, &h, &w, &n, &o_first, &o_counts, &o_steep, &o_maj,
                          &o_min, &o_slope, &o_lo, &o_hi, &o_int))
        return NULL;
    Buffers b = {.n = 0, .failed = 0};
    double *layer = get(&b, o_layer, mul(mul(h, w), 8), 1, "layer");
    const int64_t *first = get(&b, o_first, mul(n, 8), 0, "first");
    const int64_t *counts = get(&b, o_counts, mul(n, 8), 0, "counts");
    const uint8_t *steep = get(&b, o_steep, n, 0, "steep");
    const double *maj = get(&b, o_maj, mul(n, 8), 0, "major_c");
    const double *mnr = get(&b, o_min, mul(n, 8), 0, "minor_c");
    const double *slope = get(&b, o_slope, mul(n, 8), 0, "slope");
    const double *lo = get(&b, o_lo, mul(n, 8), 0, "lo");
    const double *hi = get(&b, o_hi, mul(n, 8), 0, "hi");
    const double *inten = get(&b, o_int, mul(n, 8), 0, "intensity");
    if (b.failed) { release(&b); return NULL; }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        for (int64_t step = 0; step < counts[i]; step++) {
            const int64_t m = first[i] + step;
            const double mf = (double)m;
            const double top = mf + 0.5 < hi[i] ? mf + 0.5 : hi[i];
            const double bottom = mf - 0.5 > lo[i] ? mf - 0.5 : lo[i];
            const double coverage = top - bottom;
            const double minor = mnr[i] + (mf - maj[i]) * slope[i];
            const double base = floor(minor);
            const double frac = minor - base;
            const double weight = coverage * inten[i];
            const int64_t minor0 = (int64_t)base;
            for (int side = 0; side < 2; side++) {
                const int64_t mn = minor0 + side;
                const int64_t px = steep[i] ? mn : m, py = steep[i] ? m : mn;
                if (px < 0 || px >= w || py < 0 || py >= h) continue;
                const double part = side ? weight * frac : weight * (1.0 - frac);
                layer[py * w + px] += floor(part * 4096.0 + 0.5);
            }
        }
    }
    Py_END_ALLOW_THREADS
    release(&b);
    Py_RETURN_NONE;
}

/* hist_u16(counts i64[65536], field u16, n): counts[v] += number of elements equal to v (integers: exact). */
static PyObject *hist_u16(PyObject *self, PyObject *args) {
    PyObject *o_counts, *o_field;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOn", &o_counts, &o_field, &n)) return NULL;
    Buffers b = {.n = 0, .failed = 0};
    int64_t *counts = get(&b, o_counts, mul(65536, 8), 1, "counts");
    const uint16_t *field = get(&b, o_field, mul(2, n), 0, "field");
    if (b.failed) { release(&b); return NULL; }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) counts[field[i]]++;
    Py_END_ALLOW_THREADS
    release(&b);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"shear", shear, METH_VARARGS, "motion blur: sheared band of rows"},
    {"unshear", unshear, METH_VARARGS, "motion blur: interpolated unshear of the box sums"},
    {"block_sum", block_sum, METH_VARARGS, "f x f block sums of a 0/1 mask, mirrored edges"},
    {"hist_u16", hist_u16, METH_VARARGS, "histogram of a uint16 field"},
    {"streaks", streaks, METH_VARARGS, "rain streak rasterisation (exact integer weights)"},
    {"convolve", convolve, METH_VARARGS, "exact separable convolution, reflect border"},
    {"noise_columns", noise_columns, METH_VARARGS, "x pass of the value noise's cubic interpolation"},
    {"noise_rows", noise_rows, METH_VARARGS, "y pass of the value noise, summed over octaves"},
    {"quantize_u16", quantize_u16, METH_VARARGS, "floor((v - offset) * scale + 0.5) as uint16"},
    {"haze", haze, METH_VARARGS, "smoke_haze / fire_warm_tint / dust_haze blend"},
    {"turbidity", turbidity, METH_VARARGS, "turbidity_cast blend"},
    {"glare", glare, METH_VARARGS, "water_glare blend"},
    {"inundation", inundation, METH_VARARGS, "inundation blend"},
    {"rain", rain, METH_VARARGS, "rain_streaks veil and streak screen"},
    {"low_light", low_light, METH_VARARGS, "low_light noise and re-encode"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ckernels", "Compiled corruption-engine loops", -1, methods};

PyMODINIT_FUNC PyInit__ckernels(void) { return PyModule_Create(&module); }
