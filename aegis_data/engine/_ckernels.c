/*
 * Compiled inner loops of the corruption engine (module aegis_data.engine._ckernels, beside kernels.py and the NumPy code it mirrors): the aegis-v1 corruptions and, after
 * them, the aegis-v2 models' blur, sensor noise and chroma path, atmosphere and water.
 *
 * Each function fuses, per element, exactly the IEEE-754 float32/float64 operations that the NumPy code in
 * aegis_data/engine (kernels.py, corruptions.py, motion.py, camera.py, atmosphere.py, rain.py, glint.py, flood.py)
 * performs, in the same order and with the same types, or sums integers in types that hold every partial sum
 * (exact in any order), so the output bytes are those of the NumPy path (tests compare both on every kernel). What
 * makes that hold:
 *
 *   - only + - * / and sqrt on float and double, each correctly rounded by IEEE-754 whatever the compiler
 *     vectorises;
 *   - no contraction of a*b+c into a fused multiply-add (which rounds once instead of twice): the pragma below
 *     and -ffp-contract=off in setup.py; no -ffast-math (no reassociation);
 *   - float <-> double and float -> integer conversions as C defines them (truncation for the in-range values
 *     used here), which is what NumPy's casts do.
 *
 * Arrays arrive through the buffer protocol as flat, C-contiguous memory; the Python wrappers (aegis_data/engine/
 * kernels.py and the model modules) check dtypes and shapes, and the sizes are checked again here.
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

/* The way out after a check of the arguments' values fails: the buffers released, `exc` raised with `msg`. */
static PyObject *refuse(Buffers *b, PyObject *exc, const char *msg) {
    release(b);
    PyErr_SetString(exc, msg);
    return NULL;
}

/* Work memory of one call, freed together by scratch_free (what Buffers is for the arguments): a size that
 * overflows or a failed allocation sets `failed`, and every later call then returns NULL, so a function asks for
 * all its blocks in a row and checks `failed` once. `zeroed` blocks start as zeros. */
typedef struct {
    void *blocks[8];
    int n;
    int failed;
} Scratch;

static void *scratch(Scratch *s, Py_ssize_t count, Py_ssize_t item, int zeroed) {
    if (s->failed) return NULL;
    const Py_ssize_t bytes = mul(count, item);
    void *p = NULL;
    if (bytes >= 0 && s->n < (int)(sizeof s->blocks / sizeof s->blocks[0]))
        p = zeroed ? PyMem_RawCalloc((size_t)count, (size_t)item) : PyMem_RawMalloc((size_t)bytes);
    if (p == NULL) {
        s->failed = 1;
        return NULL;
    }
    s->blocks[s->n++] = p;
    return p;
}

static void scratch_free(Scratch *s) {
    for (int i = 0; i < s->n; i++) PyMem_RawFree(s->blocks[i]);
    s->n = 0;
}

/* The way out when work memory could not be had: all of it freed, the buffers released, MemoryError. */
static PyObject *no_memory(Scratch *s, Buffers *b) {
    scratch_free(s);
    release(b);
    return PyErr_NoMemory();
}

/* A table index from a double, clamped to [0, hi] and truncated. A NaN, which would pass both comparisons of a
 * plain clamp and convert to an index far outside the table, gives 0. */
static inline Py_ssize_t table_index(double v, double hi) { return v >= 0.0 ? (Py_ssize_t)(v <= hi ? v : hi) : 0; }

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
            if (xi[k * n_out + c] < 0 || xi[k * n_out + c] >= gx)
                return refuse(&b, PyExc_IndexError, "noise_columns: tap index out of range");
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
        v = v >= 0.0f ? v : 0.0f; /* a NaN too: it would pass both comparisons of a plain clamp */
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
    if (grid < 0 || grid > (1 << 24)) { /* (float)grid exact, and every clamped value an int32 */
        PyErr_SetString(PyExc_ValueError, "low_light: the encode grid must lie in [0, 2**24]");
        return NULL;
    }
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
    Scratch s = {.n = 0, .failed = 0};
    double *ring = scratch(&s, mul(nk, row), sizeof(double), 0);
    double *pad = scratch(&s, prow, sizeof(double), 0);
    double *acc = scratch(&s, row, sizeof(double), 0);
    Py_ssize_t *tag = scratch(&s, nk, sizeof(Py_ssize_t), 0);
    const double **win = scratch(&s, nk, sizeof(double *), 0);
    if (s.failed) return no_memory(&s, &b);
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
    scratch_free(&s);
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
    Scratch s = {.n = 0, .failed = 0};
    int64_t *colsum = scratch(&s, wb * f, sizeof(int64_t), 0);
    if (s.failed) return no_memory(&s, &b);
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
    scratch_free(&s);
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
        if (e[v] < 0 || e[v] > span || r0 + v < 0 || r0 + v >= hp)
            return refuse(&b, PyExc_IndexError, "shear: shift or row out of range");
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
        if (start[i] < 1 || start[i] + 1 + w > wide)
            return refuse(&b, PyExc_IndexError, "unshear: column out of range");
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

/* ---------------------------------------------------------------------------------------------------------
 * Generation 2 (aegis-v2): the trajectory blur's taps (aegis_data/engine/motion.py), the raw sensor noise and
 * the camera's chroma path (aegis_data/engine/camera.py). Integers (exact in any order), or float64 with the
 * NumPy code's operations in its order. The Python wrappers check the preconditions stated here (weights,
 * finiteness, kernel sums) and run the NumPy code where they do not hold; the C side checks them again.
 * ------------------------------------------------------------------------------------------------------- */

/* Which instruction set the taps loop uses: 0 plain C (the compiler's vectors), 1 SSE2, 2 AVX2. All three sum
 * the same integers exactly, so the choice changes speed only; set_isa() lowers it so tests run every path. */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <immintrin.h>
#define X86_SSE2 1
#if !defined(AEGIS_NO_CLONES)
#define X86_AVX2 1
#endif
#endif

static int isa_cap(void) {
#if defined(X86_AVX2)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) return 2;
#endif
#if defined(X86_SSE2)
    return 1;
#else
    return 0;
#endif
}

static int taps_isa = -1; /* -1: not chosen yet (the CPU's best on first use) */

static int current_isa(void) {
    if (taps_isa < 0) taps_isa = isa_cap();
    return taps_isa;
}

/* set_isa(level): use at most `level` (clamped to what this build and CPU have); returns the level now in use. */
static PyObject *set_isa(PyObject *self, PyObject *args) {
    int level;
    if (!PyArg_ParseTuple(args, "i", &level)) return NULL;
    const int cap = isa_cap();
    taps_isa = level < 0 ? 0 : (level > cap ? cap : level);
    return PyLong_FromLong(taps_isa);
}

/* lut_u8_u16(out u16 (n), src u8 (n), n, table u16[256]): out[i] = table[src[i]] (the sRGB decode). */
static PyObject *lut_u8_u16(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_src, *o_tab;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOnO", &o_out, &o_src, &n, &o_tab)) return NULL;
    Buffers b = {.n = 0, .failed = 0};
    uint16_t *out = get(&b, o_out, mul(n, 2), 1, "out");
    const uint8_t *src = get(&b, o_src, n, 0, "src");
    const uint16_t *tab = get(&b, o_tab, 512, 0, "table");
    if (b.failed) { release(&b); return NULL; }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) out[i] = tab[src[i]];
    Py_END_ALLOW_THREADS
    release(&b);
    Py_RETURN_NONE;
}

/* --- Trajectory blur taps --------------------------------------------------------------------------------
 * out(y, x, c) = (2**14 + sum_k w_k I(reflect(y + dy_k), reflect(x + dx_k), c)) >> 15 for the taps of the band
 * holding row y, reflect being cv2.BORDER_REFLECT (reflect_index). Bounds: I <= 65535, w_k >= 0 and
 * sum_k w_k <= 2**15 (checked), so every partial sum is below 65535 * 2**15 + 2**14 < 2**31: exact in uint32 and
 * in int32, and the result fits uint16. The SIMD paths multiply 16-bit pairs (pmaddwd: I_a w_a + I_b w_b in
 * int32), which needs I <= 32767 and w <= 32767 as signed 16-bit values: a row whose source rows hold a larger
 * value, or a band with a weight of 2**15 (a single tap), takes the plain loop instead. */

#define TAP_CHUNK 1024
#define TAP_SLACK 64 /* elements readable past each ring row's end: the SIMD loops run whole blocks of 32 */

VECTORISED
static void tap_acc_run(uint32_t *restrict acc, const uint16_t *restrict s, uint32_t wk, Py_ssize_t m) {
    for (Py_ssize_t i = 0; i < m; i++) acc[i] += (uint32_t)s[i] * wk;
}

static void taps_plain(uint16_t *dst, const uint16_t *const *src, const uint32_t *wt, Py_ssize_t nt, Py_ssize_t m) {
    uint32_t acc[TAP_CHUNK];
    for (Py_ssize_t i0 = 0; i0 < m; i0 += TAP_CHUNK) {
        const Py_ssize_t k = m - i0 < TAP_CHUNK ? m - i0 : TAP_CHUNK;
        for (Py_ssize_t i = 0; i < k; i++) acc[i] = 1u << 14;
        for (Py_ssize_t t = 0; t < nt; t++) tap_acc_run(acc, src[t] + i0, wt[t], k);
        for (Py_ssize_t i = 0; i < k; i++) dst[i0 + i] = (uint16_t)(acc[i] >> 15);
    }
}

#if defined(X86_SSE2)
/* Blocks of 16 elements, tap pairs (a, b) interleaved so that pmaddwd forms I_a w_a + I_b w_b per element;
 * wpair = w_a | w_b << 16. The sums (< 2**30 here) are shifted and packed back to uint16 by a signed pack of
 * v - 32768 (SSE2 has no unsigned 32-bit pack). Writes whole blocks: dst holds m rounded up to 32. */
static void taps_sse2(uint16_t *dst, const uint16_t *const *pa, const uint16_t *const *pb, const int32_t *wpair,
                      Py_ssize_t np_, Py_ssize_t m) {
    const __m128i bias = _mm_set1_epi32(1 << 14), half = _mm_set1_epi32(32768), flip = _mm_set1_epi16(-32768);
    for (Py_ssize_t i = 0; i < m; i += 16) {
        __m128i a0 = bias, a1 = bias, a2 = bias, a3 = bias;
        for (Py_ssize_t j = 0; j < np_; j++) {
            const __m128i wv = _mm_set1_epi32(wpair[j]);
            const __m128i x0 = _mm_loadu_si128((const __m128i *)(pa[j] + i));
            const __m128i y0 = _mm_loadu_si128((const __m128i *)(pb[j] + i));
            const __m128i x1 = _mm_loadu_si128((const __m128i *)(pa[j] + i + 8));
            const __m128i y1 = _mm_loadu_si128((const __m128i *)(pb[j] + i + 8));
            a0 = _mm_add_epi32(a0, _mm_madd_epi16(_mm_unpacklo_epi16(x0, y0), wv));
            a1 = _mm_add_epi32(a1, _mm_madd_epi16(_mm_unpackhi_epi16(x0, y0), wv));
            a2 = _mm_add_epi32(a2, _mm_madd_epi16(_mm_unpacklo_epi16(x1, y1), wv));
            a3 = _mm_add_epi32(a3, _mm_madd_epi16(_mm_unpackhi_epi16(x1, y1), wv));
        }
        a0 = _mm_sub_epi32(_mm_srli_epi32(a0, 15), half);
        a1 = _mm_sub_epi32(_mm_srli_epi32(a1, 15), half);
        a2 = _mm_sub_epi32(_mm_srli_epi32(a2, 15), half);
        a3 = _mm_sub_epi32(_mm_srli_epi32(a3, 15), half);
        _mm_storeu_si128((__m128i *)(dst + i), _mm_xor_si128(_mm_packs_epi32(a0, a1), flip));
        _mm_storeu_si128((__m128i *)(dst + i + 8), _mm_xor_si128(_mm_packs_epi32(a2, a3), flip));
    }
}
#endif

#if defined(X86_AVX2)
/* The same in 256-bit registers, 32 elements per block. unpacklo/hi work within 128-bit lanes, so a0 holds
 * elements 0-3 and 8-11, a1 4-7 and 12-15; packus (also per lane) puts them back in order. */
__attribute__((target("avx2")))
static void taps_avx2(uint16_t *dst, const uint16_t *const *pa, const uint16_t *const *pb, const int32_t *wpair,
                      Py_ssize_t np_, Py_ssize_t m) {
    const __m256i bias = _mm256_set1_epi32(1 << 14);
    for (Py_ssize_t i = 0; i < m; i += 32) {
        __m256i a0 = bias, a1 = bias, a2 = bias, a3 = bias;
        for (Py_ssize_t j = 0; j < np_; j++) {
            const __m256i wv = _mm256_set1_epi32(wpair[j]);
            const __m256i x0 = _mm256_loadu_si256((const __m256i *)(pa[j] + i));
            const __m256i y0 = _mm256_loadu_si256((const __m256i *)(pb[j] + i));
            const __m256i x1 = _mm256_loadu_si256((const __m256i *)(pa[j] + i + 16));
            const __m256i y1 = _mm256_loadu_si256((const __m256i *)(pb[j] + i + 16));
            a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_unpacklo_epi16(x0, y0), wv));
            a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_unpackhi_epi16(x0, y0), wv));
            a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_unpacklo_epi16(x1, y1), wv));
            a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_unpackhi_epi16(x1, y1), wv));
        }
        a0 = _mm256_srli_epi32(a0, 15);
        a1 = _mm256_srli_epi32(a1, 15);
        a2 = _mm256_srli_epi32(a2, 15);
        a3 = _mm256_srli_epi32(a3, 15);
        _mm256_storeu_si256((__m256i *)(dst + i), _mm256_packus_epi32(a0, a1));
        _mm256_storeu_si256((__m256i *)(dst + i + 16), _mm256_packus_epi32(a2, a3));
    }
}
#endif

/* taps(out, out_kind, src, src_kind, h, w, decode u16[256] | None, encode u8[32768] | None, bands i64 (nb, 2),
 *      starts i64 (nb + 1), dy, dx, wt i64 (nt), nb, nt, bits)
 * src (h, w, 3): src_kind 0 uint16 linear, 1 uint8 sRGB decoded through `decode`. out (h, w, 3): out_kind 0
 * uint16 linear, 1 uint8 sRGB: encode[min(v, 32767)]. Band i covers rows bands[i, 0] .. bands[i, 1] - 1 with
 * the taps starts[i] .. starts[i + 1] - 1; rows in no band are not written. bits must be 15.
 *
 * Source rows are decoded once each into a ring of 2 ry + 1 rows, each widened by rx reflected pixels on both
 * sides (the rows cv2.copyMakeBorder would make), indexed by padded row y + dy + ry. */
static PyObject *taps(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_src, *o_dec, *o_enc, *o_bands, *o_starts, *o_dy, *o_dx, *o_wt;
    int out_kind, src_kind, bits;
    Py_ssize_t h, w, nb, nt;
    if (!PyArg_ParseTuple(args, "OiOinnOOOOOOOnni", &o_out, &out_kind, &o_src, &src_kind, &h, &w, &o_dec, &o_enc,
                          &o_bands, &o_starts, &o_dy, &o_dx, &o_wt, &nb, &nt, &bits))
        return NULL;
    if (out_kind < 0 || out_kind > 1 || src_kind < 0 || src_kind > 1 || h < 1 || w < 1 || nb < 0 || nt < 0 ||
        bits != 15) {
        PyErr_SetString(PyExc_ValueError, "taps: bad arguments");
        return NULL;
    }
    const Py_ssize_t row = mul(w, 3), n = mul(h, row);
    Buffers b = {.n = 0, .failed = 0};
    void *out = get(&b, o_out, mul(n, out_kind == 0 ? 2 : 1), 1, "out");
    const void *src = get(&b, o_src, mul(n, src_kind == 0 ? 2 : 1), 0, "src");
    const uint16_t *dec = src_kind == 1 ? get(&b, o_dec, 512, 0, "decode") : NULL;
    const uint8_t *enc = out_kind == 1 ? get(&b, o_enc, 32768, 0, "encode") : NULL;
    const int64_t *bands = get(&b, o_bands, mul(mul(nb, 2), 8), 0, "bands");
    const int64_t *starts = get(&b, o_starts, mul(nb + 1, 8), 0, "starts");
    const int64_t *dy = get(&b, o_dy, mul(nt, 8), 0, "dy");
    const int64_t *dx = get(&b, o_dx, mul(nt, 8), 0, "dx");
    const int64_t *wt = get(&b, o_wt, mul(nt, 8), 0, "wt");
    if (b.failed) { release(&b); return NULL; }
    /* The Python side refuses kernels over four frames; the same bound keeps the ring a multiple of the frame. */
    const int64_t reach = 4 * (int64_t)(h > w ? h : w);
    int64_t ry = 0, rx = 0;
    const char *bad = NULL;
    /* Tap ranges first (all of them: a later range must not let an earlier one read past the taps). */
    if (starts[0] != 0 || starts[nb] > nt) bad = "taps: band tap ranges out of range";
    for (Py_ssize_t i = 0; !bad && i < nb; i++)
        if (starts[i] > starts[i + 1]) bad = "taps: band tap ranges out of range";
    for (Py_ssize_t i = 0; !bad && i < nb; i++) {
        if (bands[2 * i] < 0 || bands[2 * i] > bands[2 * i + 1] || bands[2 * i + 1] > h)
            bad = "taps: band rows out of range";
        int64_t sum = 0;
        for (int64_t t = starts[i]; !bad && t < starts[i + 1]; t++) {
            if (wt[t] < 0 || wt[t] > (1 << 15)) bad = "taps: weights must lie in [0, 2**15]";
            else if (dy[t] < -reach || dy[t] > reach || dx[t] < -reach || dx[t] > reach) bad = "taps: offset too large";
            sum += wt[t];
            ry = dy[t] < 0 ? (-dy[t] > ry ? -dy[t] : ry) : (dy[t] > ry ? dy[t] : ry);
            rx = dx[t] < 0 ? (-dx[t] > rx ? -dx[t] : rx) : (dx[t] > rx ? dx[t] : rx);
        }
        if (!bad && sum > (1 << 15)) bad = "taps: a band's weights sum above 2**15";
    }
    if (bad) { release(&b); PyErr_SetString(PyExc_ValueError, bad); return NULL; }
    const Py_ssize_t nslots = (Py_ssize_t)(2 * ry + 1), prow = (w + 2 * (Py_ssize_t)rx) * 3;
    const Py_ssize_t stride = prow + TAP_SLACK, mpad = (row + 31) / 32 * 32;
    Py_ssize_t maxt = 1;
    for (Py_ssize_t i = 0; i < nb; i++)
        if (starts[i + 1] - starts[i] > maxt) maxt = (Py_ssize_t)(starts[i + 1] - starts[i]);
    const Py_ssize_t maxp = (maxt + 1) / 2;
    Scratch s = {.n = 0, .failed = 0};
    uint16_t *ring = scratch(&s, mul(nslots, stride), sizeof(uint16_t), 1); /* zeros: the SIMD loops read the slack */
    int64_t *tag = scratch(&s, nslots, sizeof(int64_t), 0);
    uint8_t *high = scratch(&s, nslots, 1, 0);
    uint16_t *tmp = scratch(&s, mpad, sizeof(uint16_t), 0);
    const uint16_t **ptr = scratch(&s, maxt + 2 * maxp, sizeof(uint16_t *), 0);
    uint32_t *wu = scratch(&s, maxt, sizeof(uint32_t), 0);
    int32_t *wpair = scratch(&s, maxp, sizeof(int32_t), 0);
    if (s.failed) return no_memory(&s, &b);
    const uint16_t **pa = ptr + maxt, **pb = ptr + maxt + maxp; /* the taps in pairs for the SIMD loops */
    const int isa = current_isa();
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t s = 0; s < nslots; s++) tag[s] = -1;
    for (Py_ssize_t bi = 0; bi < nb; bi++) {
        const Py_ssize_t t0 = (Py_ssize_t)starts[bi], ntap = (Py_ssize_t)(starts[bi + 1] - starts[bi]);
        const Py_ssize_t npairs = (ntap + 1) / 2;
        int small_weights = 1;
        for (Py_ssize_t t = 0; t < ntap; t++) {
            wu[t] = (uint32_t)wt[t0 + t];
            small_weights &= wt[t0 + t] < (1 << 15);
        }
        for (Py_ssize_t j = 0; j < npairs; j++) {
            /* an odd last tap pairs with weight 0 */
            const uint32_t wa = wu[2 * j], wb = 2 * j + 1 < ntap ? wu[2 * j + 1] : 0;
            wpair[j] = (int32_t)(wa | (wb << 16));
        }
        for (Py_ssize_t y = (Py_ssize_t)bands[2 * bi]; y < (Py_ssize_t)bands[2 * bi + 1]; y++) {
            int any_high = 0;
            for (Py_ssize_t t = 0; t < ntap; t++) {
                const int64_t p = (int64_t)y + dy[t0 + t] + ry; /* padded row, in [y, y + 2 ry] */
                const Py_ssize_t slot = (Py_ssize_t)(p % nslots);
                uint16_t *rp = ring + slot * stride;
                if (tag[slot] != p) {
                    const Py_ssize_t sy = reflect_index((Py_ssize_t)(p - ry), h);
                    uint16_t *mid = rp + rx * 3;
                    if (src_kind == 0) {
                        memcpy(mid, (const uint16_t *)src + sy * row, (size_t)row * sizeof(uint16_t));
                    } else {
                        const uint8_t *s8 = (const uint8_t *)src + sy * row;
                        for (Py_ssize_t i = 0; i < row; i++) mid[i] = dec[s8[i]];
                    }
                    for (Py_ssize_t x = 0; x < rx; x++) {
                        const Py_ssize_t left = reflect_index(x - (Py_ssize_t)rx, w), right = reflect_index(w + x, w);
                        for (int c = 0; c < 3; c++) {
                            rp[x * 3 + c] = mid[left * 3 + c];
                            rp[(w + rx + x) * 3 + c] = mid[right * 3 + c];
                        }
                    }
                    uint16_t any = 0;
                    for (Py_ssize_t i = 0; i < prow; i++) any |= rp[i];
                    high[slot] = (any & 0x8000) != 0;
                    tag[slot] = p;
                }
                any_high |= high[slot];
                ptr[t] = rp + (rx + dx[t0 + t]) * 3;
            }
            const int paired = isa >= 1 && small_weights && !any_high;
            if (paired) {
                for (Py_ssize_t j = 0; j < npairs; j++) {
                    pa[j] = ptr[2 * j];
                    pb[j] = 2 * j + 1 < ntap ? ptr[2 * j + 1] : ptr[2 * j];
                }
            }
#if defined(X86_AVX2)
            if (paired && isa == 2) taps_avx2(tmp, pa, pb, wpair, npairs, row);
            else
#endif
#if defined(X86_SSE2)
            if (paired) taps_sse2(tmp, pa, pb, wpair, npairs, row);
            else
#endif
            taps_plain(tmp, ptr, wu, ntap, row);
            if (out_kind == 0) {
                memcpy((uint16_t *)out + y * row, tmp, (size_t)row * sizeof(uint16_t));
            } else {
                uint8_t *o8 = (uint8_t *)out + y * row;
                for (Py_ssize_t i = 0; i < row; i++) o8[i] = enc[tmp[i] < 32767 ? tmp[i] : 32767];
            }
        }
    }
    Py_END_ALLOW_THREADS
    scratch_free(&s);
    release(&b);
    Py_RETURN_NONE;
}

/* --- Raw sensor noise -------------------------------------------------------------------------------------
 * camera.raw_noise_image fused, per element the NumPy code's float64 operations in its order:
 *   S = (double)L * d;  sd = sqrt((S_site * a_c) + b_c);  z = (double)normal[idx] * 2**-20;  n = sd * z  (per site)
 *   demosaic of n (camera._demosaic_padded: ((a + b) * 0.5, (((a + b) + c) + d) * 0.25; reflect-101 border, or the edge
 *   pixel for a frame one pixel thick);  v = (S + dem) + 0.5;  out = encode[clip(floor(v), 0, 32767)].
 * Preconditions (checked): d, a_c, b_c finite and >= 0 and 65535 d a_c + b_c <= 1e300, so every value is finite
 * (no NaN reaches the float -> int conversion); floor then clip equals clamp to [0, 32767] then truncation. */

#define RAW_LIMIT 1e300

/* n = sqrt(((sv d) a) + b) (z 2**-20) element-wise. Written with SSE2 intrinsics where present: the compiler
 * keeps a scalar sqrt for C's errno otherwise (the operands here are never negative); IEEE sqrt is correctly
 * rounded either way. */
static void site_noise_run(double *restrict n, const double *sv, const double *z, const double *ar, const double *br,
                           double d, Py_ssize_t m) {
    Py_ssize_t i = 0;
#if defined(X86_SSE2)
    const __m128d dv = _mm_set1_pd(d), scale = _mm_set1_pd(0x1p-20);
    for (; i + 2 <= m; i += 2) {
        __m128d s = _mm_mul_pd(_mm_loadu_pd(sv + i), dv);
        s = _mm_mul_pd(s, _mm_loadu_pd(ar + i));
        s = _mm_add_pd(s, _mm_loadu_pd(br + i));
        const __m128d zi = _mm_mul_pd(_mm_loadu_pd(z + i), scale);
        _mm_storeu_pd(n + i, _mm_mul_pd(_mm_sqrt_pd(s), zi));
    }
#endif
    for (; i < m; i++) {
        double s = sv[i] * d;
        s = s * ar[i];
        s = s + br[i];
        const double zi = z[i] * 0x1p-20;
        n[i] = sqrt(s) * zi;
    }
}

VECTORISED
static void noisy_quantize_run(int32_t *restrict q, const uint16_t *lin, const double *dem, double d, Py_ssize_t m) {
    for (Py_ssize_t i = 0; i < m; i++) {
        double v = (double)lin[i] * d;
        v = v + dem[i];
        v = v + 0.5;
        v = v < 0.0 ? 0.0 : v;
        v = v > 32767.0 ? 32767.0 : v;
        q[i] = (int32_t)v;
    }
}

/* Row r's index in the mirrored mosaic: reflect-101 (np.pad "reflect") when both sides exceed 1, else the
 * edge (np.pad "edge"), for r in [-1, len]. */
static Py_ssize_t mosaic_index(Py_ssize_t r, Py_ssize_t len, int reflect) {
    if (r < 0) return reflect ? 1 : 0;
    if (r >= len) return reflect ? len - 2 : len - 1;
    return r;
}

/* The site at x of a row with red (own = 0) or blue (own = 2) sites: its own value, green from the 4 neighbours
 * across, the other of red / blue from the 4 diagonals. */
static inline void dem_red_blue(double *o, const double *up, const double *c, const double *dn, Py_ssize_t x, int own) {
    const double cross = ((up[x] + dn[x]) + c[x - 1]) + c[x + 1];
    const double diag = ((up[x - 1] + up[x + 1]) + dn[x - 1]) + dn[x + 1];
    o[own] = c[x];
    o[1] = cross * 0.25;
    o[2 - own] = diag * 0.25;
}

/* A green site: red and blue from its left / right and up / down neighbours (which is which depends on the row). */
static inline void dem_green(double *o, const double *up, const double *c, const double *dn, Py_ssize_t x, int odd) {
    const double horiz = (c[x - 1] + c[x + 1]) * 0.5, vert = (up[x] + dn[x]) * 0.5;
    o[0] = odd ? vert : horiz;
    o[1] = c[x];
    o[2] = odd ? horiz : vert;
}

/* One row of camera._demosaic_padded into dem (w, 3) from the noise rows above, at and below (each readable at -1 and w):
 * R G R G ... on even rows, G B G B ... on odd ones. */
static void demosaic_row(double *restrict dem, const double *up, const double *c, const double *dn, Py_ssize_t w,
                         int odd) {
    Py_ssize_t x = 0;
    if (!odd) {
        for (; x + 1 < w; x += 2) {
            dem_red_blue(dem + 3 * x, up, c, dn, x, 0);
            dem_green(dem + 3 * x + 3, up, c, dn, x + 1, 0);
        }
        if (x < w) dem_red_blue(dem + 3 * x, up, c, dn, x, 0);
    } else {
        for (; x + 1 < w; x += 2) {
            dem_green(dem + 3 * x, up, c, dn, x, 1);
            dem_red_blue(dem + 3 * x + 3, up, c, dn, x + 1, 2);
        }
        if (x < w) dem_green(dem + 3 * x, up, c, dn, x, 1);
    }
}

/* raw_noise(out u8 (h, w, 3), lin u16 (h, w, 3), h, w, d, a f64[3], b f64[3], noise u16 (h, w),
 *           normal i32[65536], encode u8[32768]) */
static PyObject *raw_noise(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_lin, *o_a, *o_b, *o_noise, *o_normal, *o_enc;
    Py_ssize_t h, w;
    double d;
    if (!PyArg_ParseTuple(args, "OOnndOOOOO", &o_out, &o_lin, &h, &w, &d, &o_a, &o_b, &o_noise, &o_normal, &o_enc))
        return NULL;
    if (h < 1 || w < 1) {
        PyErr_SetString(PyExc_ValueError, "raw_noise: bad arguments");
        return NULL;
    }
    const Py_ssize_t row = mul(w, 3);
    Buffers b = {.n = 0, .failed = 0};
    uint8_t *out = get(&b, o_out, mul(h, row), 1, "out");
    const uint16_t *lin = get(&b, o_lin, mul(mul(h, row), 2), 0, "linear");
    const double *a = get(&b, o_a, 24, 0, "a");
    const double *bb = get(&b, o_b, 24, 0, "b");
    const uint16_t *noise = get(&b, o_noise, mul(mul(h, w), 2), 0, "noise");
    const int32_t *normal = get(&b, o_normal, 65536 * 4, 0, "normal");
    const uint8_t *enc = get(&b, o_enc, 32768, 0, "encode");
    if (b.failed) { release(&b); return NULL; }
    int ok = isfinite(d) && d >= 0.0;
    for (int c = 0; c < 3; c++)
        ok = ok && isfinite(a[c]) && isfinite(bb[c]) && a[c] >= 0.0 && bb[c] >= 0.0 &&
             65535.0 * d * a[c] + bb[c] <= RAW_LIMIT;
    if (!ok) {
        return refuse(&b, PyExc_ValueError,
                      "raw_noise: brightness and noise coefficients must be finite, >= 0 and bounded");
    }
    /* Work rows: three noise rows (previous, current, next) widened by one mirrored column each side. */
    const Py_ssize_t pw = w + 2;
    Scratch s = {.n = 0, .failed = 0};
    double *ring = scratch(&s, mul(3, pw), sizeof(double), 0);
    double *sv = scratch(&s, w, sizeof(double), 0);
    double *z = scratch(&s, w, sizeof(double), 0);
    double *pat = scratch(&s, mul(4, w), sizeof(double), 0);
    double *dem = scratch(&s, row, sizeof(double), 0);
    int32_t *q = scratch(&s, row, sizeof(int32_t), 0);
    if (s.failed) return no_memory(&s, &b);
    Py_BEGIN_ALLOW_THREADS
    const int reflect = h > 1 && w > 1;
    /* a and b per column for even rows (R G R G ...) and odd rows (G B G B ...) */
    double *a_even = pat, *a_odd = pat + w, *b_even = pat + 2 * w, *b_odd = pat + 3 * w;
    for (Py_ssize_t x = 0; x < w; x++) {
        a_even[x] = a[x & 1]; a_odd[x] = a[1 + (x & 1)];
        b_even[x] = bb[x & 1]; b_odd[x] = bb[1 + (x & 1)];
    }
    Py_ssize_t held[3] = {-1, -1, -1}; /* source row in each ring slot */
    for (Py_ssize_t y = 0; y < h; y++) {
        const double *rows[3];
        for (int k = 0; k < 3; k++) {
            const Py_ssize_t r = mosaic_index(y - 1 + k, h, reflect);
            const int slot = (int)(r % 3);
            double *rp = ring + slot * pw;
            if (held[slot] != r) {
                const uint16_t *lr = lin + r * row;
                const uint16_t *nr = noise + r * w;
                const int odd = (int)(r & 1);
                for (Py_ssize_t x = 0; x < w; x++) {
                    sv[x] = (double)lr[3 * x + odd + (x & 1)]; /* the site's own channel: 0 R, 1 G, 2 B */
                    z[x] = (double)normal[nr[x]];
                }
                site_noise_run(rp + 1, sv, z, odd ? a_odd : a_even, odd ? b_odd : b_even, d, w);
                rp[0] = rp[1 + mosaic_index(-1, w, reflect)];
                rp[w + 1] = rp[1 + mosaic_index(w, w, reflect)];
                held[slot] = r;
            }
            rows[k] = rp + 1;
        }
        demosaic_row(dem, rows[0], rows[1], rows[2], w, (int)(y & 1));
        noisy_quantize_run(q, lin + y * row, dem, d, row);
        uint8_t *orow = out + y * row;
        for (Py_ssize_t i = 0; i < row; i++) orow[i] = enc[q[i]];
    }
    Py_END_ALLOW_THREADS
    scratch_free(&s);
    release(&b);
    Py_RETURN_NONE;
}

/* --- Chroma path ------------------------------------------------------------------------------------------
 * camera.chroma_path fused (integers; bounds in comments): BT.601 YCbCr in 16-bit fixed point, the chroma planes
 * averaged over 2 x 2 blocks (odd sides repeat their last row / column), optionally blurred with an integer
 * kernel k (k >= 0, 1 <= sum k <= 2**20: checked) and rounded (2 B + T) // (2 T) with T = (sum k)**2, triangle
 * upsampling, back to RGB with floor(x / 65536) as camera._shift16. */

#define CHROMA_KSUM_MAX (1 << 20)

/* The r, g, b planes (int32) of n interleaved pixels. */
static void split_rgb(int32_t *restrict r, int32_t *restrict g, int32_t *restrict b, const uint8_t *rgb, Py_ssize_t n) {
    for (Py_ssize_t x = 0; x < n; x++) {
        r[x] = rgb[3 * x];
        g[x] = rgb[3 * x + 1];
        b[x] = rgb[3 * x + 2];
    }
}

/* Cb and Cr (camera.to_ycbcr): the shifted operands lie in [65536, 16777216], so the values lie in [1, 256]. */
VECTORISED
static void cbcr_run(int32_t *restrict cb, int32_t *restrict cr, const int32_t *r, const int32_t *g, const int32_t *b,
                     Py_ssize_t n) {
    for (Py_ssize_t x = 0; x < n; x++) {
        cb[x] = (-11059 * r[x] - 21709 * g[x] + 32768 * b[x] + (128 << 16) + 32768) >> 16;
        cr[x] = (32768 * r[x] - 27439 * g[x] - 5329 * b[x] + (128 << 16) + 32768) >> 16;
    }
}

/* 2 x 2 block averages of one pair of rows: s holds the column sums of the two rows (values <= 512), with
 * s[w] = s[w - 1] for an odd width; out[bx] = (s[2 bx] + s[2 bx + 1] + 2) >> 2 in [1, 256]. */
VECTORISED
static void pair_sum_run(int32_t *restrict s, const int32_t *a, const int32_t *b, Py_ssize_t n) {
    for (Py_ssize_t x = 0; x < n; x++) s[x] = a[x] + b[x];
}

VECTORISED
static void block_avg_run(int32_t *restrict out, const int32_t *s, Py_ssize_t n) {
    for (Py_ssize_t bx = 0; bx < n; bx++) out[bx] = (s[2 * bx] + s[2 * bx + 1] + 2) >> 2;
}

/* col[x + 1] = 3 H(yi, x) + H(yn, x) (<= 1024) for the triangle upsampling of one output row. */
VECTORISED
static void tri_col_run(int32_t *restrict col, const int32_t *own, const int32_t *near, Py_ssize_t n) {
    for (Py_ssize_t x = 0; x < n; x++) col[x + 1] = 3 * own[x] + near[x];
}

/* Upsampled chroma of one row from its padded col (col[0] = column -1, col[n + 1] = column n, edges repeated):
 * (9 own + 3 vertical + 3 horizontal + diagonal + 8) >> 4 = (3 col(xi) + col(xn) + 8) >> 4 (integers: any
 * grouping is exact), in [1, 256]; pixel 2 x takes its left neighbour block, 2 x + 1 its right one. */
VECTORISED
static void tri_row_run(int32_t *restrict up, const int32_t *col, Py_ssize_t n) {
    for (Py_ssize_t x = 0; x < n; x++) {
        const int32_t own = 3 * col[x + 1];
        up[2 * x] = (own + col[x] + 8) >> 4;
        up[2 * x + 1] = (own + col[x + 2] + 8) >> 4;
    }
}

/* floor(v / 65536) for |v| < 2**30, as camera._shift16 (the operand of >> is made non-negative). */
static inline int32_t shift16(int32_t v) { return ((v + (1 << 30)) >> 16) - (1 << 14); }

static inline int32_t clip255(int32_t v) { return v < 0 ? 0 : (v > 255 ? 255 : v); }

/* camera.from_ycbcr with Y from the pixel's own RGB: u, v in [-128, 128], so every product is below 2**24 and
 * every shifted operand lies in (0, 2**31). Results in place of r, g, b. */
VECTORISED
static void to_rgb_run(int32_t *restrict r, int32_t *restrict g, int32_t *restrict b, const int32_t *cb,
                       const int32_t *cr, Py_ssize_t n) {
    for (Py_ssize_t x = 0; x < n; x++) {
        const int32_t yy = (19595 * r[x] + 38470 * g[x] + 7471 * b[x] + 32768) >> 16;
        const int32_t u = cb[x] - 128, v = cr[x] - 128;
        r[x] = clip255(yy + shift16(91881 * v + 32768));
        g[x] = clip255(yy + shift16(-22554 * u - 46802 * v + 32768));
        b[x] = clip255(yy + shift16(116130 * u + 32768));
    }
}

VECTORISED
static void i32_tap_run(int32_t *restrict acc, const int32_t *restrict s, int32_t k, Py_ssize_t m) {
    for (Py_ssize_t i = 0; i < m; i++) acc[i] += k * s[i];
}

VECTORISED
static void f64_tap_run(double *restrict acc, const int32_t *restrict s, double k, Py_ssize_t m) {
    for (Py_ssize_t i = 0; i < m; i++) acc[i] = acc[i] + k * (double)s[i];
}

/* dst = floor((2 acc + total) / den) with den = 2 total: 2 acc + total < 2**50 and den < 2**42 are exact
 * float64 integers and the quotient lies in [0, 257]. num * (1 / den) in float64 is within 1e-13 of it, so its
 * truncation is the floor or one off; the corrections against the exact products q den (< 2**51) make it the
 * integer floor. */
VECTORISED
static void round_div_run(int32_t *restrict dst, const double *acc, double total, double den, Py_ssize_t n) {
    const double inv = 1.0 / den;
    for (Py_ssize_t x = 0; x < n; x++) {
        const double num = 2.0 * acc[x] + total;
        double q = (double)(int32_t)(num * inv);
        q = q * den > num ? q - 1.0 : q;
        q = (q + 1.0) * den <= num ? q + 1.0 : q;
        dst[x] = (int32_t)q;
    }
}

/* plane (hh, ww) blurred in place as subsample_chroma does (convolve_exact: correlation with k, mirrored border
 * cv2.BORDER_REFLECT, then the rounding above): the row pass in int32 (values <= 256 sum k <= 2**28), the column
 * pass in float64 (integers <= 2**28 sum k <= 2**48: exact). pad holds ww + 2 r values. */
static void chroma_blur(int32_t *plane, Py_ssize_t hh, Py_ssize_t ww, const int64_t *k, Py_ssize_t nk, int32_t *rows,
                        int32_t *pad, double *acc) {
    const Py_ssize_t r = nk / 2;
    int64_t ksum = 0;
    for (Py_ssize_t j = 0; j < nk; j++) ksum += k[j];
    const double total = (double)(ksum * ksum), den = 2.0 * total; /* sum k <= 2**20: exact */
    for (Py_ssize_t y = 0; y < hh; y++) {
        const int32_t *src = plane + y * ww;
        memcpy(pad + r, src, (size_t)ww * sizeof(int32_t));
        for (Py_ssize_t x = 0; x < r; x++) {
            pad[x] = src[reflect_index(x - r, ww)];
            pad[ww + r + x] = src[reflect_index(ww + x, ww)];
        }
        int32_t *dst = rows + y * ww;
        for (Py_ssize_t x = 0; x < ww; x++) dst[x] = 0;
        for (Py_ssize_t j = 0; j < nk; j++) i32_tap_run(dst, pad + j, (int32_t)k[j], ww);
    }
    for (Py_ssize_t y = 0; y < hh; y++) {
        for (Py_ssize_t x = 0; x < ww; x++) acc[x] = 0.0;
        for (Py_ssize_t j = 0; j < nk; j++)
            f64_tap_run(acc, rows + reflect_index(y + j - r, hh) * ww, (double)k[j], ww);
        round_div_run(plane + y * ww, acc, total, den, ww);
    }
}

/* chroma(out u8 (h, w, 3), rgb u8 (h, w, 3), h, w, kernel i64 (nk) | None, nk) */
static PyObject *chroma(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_rgb, *o_k;
    Py_ssize_t h, w, nk;
    if (!PyArg_ParseTuple(args, "OOnnOn", &o_out, &o_rgb, &h, &w, &o_k, &nk)) return NULL;
    if (h < 1 || w < 1 || nk < 0 || (nk > 0 && nk % 2 == 0)) {
        PyErr_SetString(PyExc_ValueError, "chroma: bad arguments");
        return NULL;
    }
    const Py_ssize_t row = mul(w, 3);
    Buffers b = {.n = 0, .failed = 0};
    uint8_t *out = get(&b, o_out, mul(h, row), 1, "out");
    const uint8_t *rgb = get(&b, o_rgb, mul(h, row), 0, "rgb");
    const int64_t *k = nk > 0 ? get(&b, o_k, mul(nk, 8), 0, "kernel") : NULL;
    if (b.failed) { release(&b); return NULL; }
    int64_t ksum = 0;
    for (Py_ssize_t j = 0; j < nk; j++) {
        if (k[j] < 0 || k[j] > CHROMA_KSUM_MAX) ksum = CHROMA_KSUM_MAX + 1;
        else ksum += k[j];
        if (ksum > CHROMA_KSUM_MAX) break;
    }
    if (nk > 0 && (ksum < 1 || ksum > CHROMA_KSUM_MAX))
        return refuse(&b, PyExc_ValueError, "chroma: kernel weights must be >= 0 with a sum in [1, 2**20]");
    const Py_ssize_t hh = (h + 1) / 2, ww = (w + 1) / 2, r = nk / 2;
    const Py_ssize_t plane = mul(hh, ww), wr = 2 * ww + 2 * r + 4; /* work rows: 2 ww >= w, room for padding */
    Scratch s = {.n = 0, .failed = 0};
    int32_t *half = scratch(&s, mul(2, plane), sizeof(int32_t), 0);
    int32_t *rows = nk > 0 ? scratch(&s, plane, sizeof(int32_t), 0) : NULL;
    int32_t *work = scratch(&s, mul(10, wr), sizeof(int32_t), 0);
    double *acc = scratch(&s, ww, sizeof(double), 0);
    if (s.failed) return no_memory(&s, &b);
    Py_BEGIN_ALLOW_THREADS
    int32_t *pr = work, *pg = work + wr, *pb = work + 2 * wr;
    int32_t *cb0 = work + 3 * wr, *cr0 = work + 4 * wr, *cb1 = work + 5 * wr, *cr1 = work + 6 * wr;
    int32_t *sum = work + 7 * wr, *colb = work + 8 * wr, *colr = work + 9 * wr;
    int32_t *hcb = half, *hcr = half + plane;
    /* 2 x 2 block averages; an odd last row or column is repeated (np.pad "edge"). */
    for (Py_ssize_t by = 0; by < hh; by++) {
        const Py_ssize_t y0 = 2 * by, y1 = 2 * by + 1 < h ? 2 * by + 1 : h - 1;
        split_rgb(pr, pg, pb, rgb + y0 * row, w);
        cbcr_run(cb0, cr0, pr, pg, pb, w);
        split_rgb(pr, pg, pb, rgb + y1 * row, w);
        cbcr_run(cb1, cr1, pr, pg, pb, w);
        pair_sum_run(sum, cb0, cb1, w);
        sum[w] = sum[w - 1];
        block_avg_run(hcb + by * ww, sum, ww);
        pair_sum_run(sum, cr0, cr1, w);
        sum[w] = sum[w - 1];
        block_avg_run(hcr + by * ww, sum, ww);
    }
    if (nk > 0) {
        chroma_blur(hcb, hh, ww, k, nk, rows, sum, acc); /* sum (wr >= ww + 2 r) holds the mirrored row */
        chroma_blur(hcr, hh, ww, k, nk, rows, sum, acc);
    }
    int32_t *upb = cb0, *upr = cr0; /* upsampled rows, 2 ww >= w values */
    for (Py_ssize_t y = 0; y < h; y++) {
        const Py_ssize_t yi = y / 2, yn = (y & 1) ? (yi + 1 < hh ? yi + 1 : hh - 1) : (yi > 0 ? yi - 1 : 0);
        tri_col_run(colb, hcb + yi * ww, hcb + yn * ww, ww);
        tri_col_run(colr, hcr + yi * ww, hcr + yn * ww, ww);
        colb[0] = colb[1]; colb[ww + 1] = colb[ww];
        colr[0] = colr[1]; colr[ww + 1] = colr[ww];
        tri_row_run(upb, colb, ww);
        tri_row_run(upr, colr, ww);
        split_rgb(pr, pg, pb, rgb + y * row, w);
        to_rgb_run(pr, pg, pb, upb, upr, w);
        uint8_t *o = out + y * row;
        for (Py_ssize_t x = 0; x < w; x++) {
            o[3 * x] = (uint8_t)pr[x];
            o[3 * x + 1] = (uint8_t)pg[x];
            o[3 * x + 2] = (uint8_t)pb[x];
        }
    }
    Py_END_ALLOW_THREADS
    scratch_free(&s);
    release(&b);
    Py_RETURN_NONE;
}


/* --- aegis-v2 atmosphere (aegis_data/engine/atmosphere.py, rain.py) ---------------------------------------
 * The same float64 operations per pixel as the NumPy reference (haze_render / _haze_numpy, drop_layer,
 * blend_drops, cast_linear), in the same order, then integers; sizes and bounds checked here. */

#define ATMOS_ONE 32768
#define ATMOS_LINEAR_MAX 32767

/* One row's sight-line paths, d = min(sqrt(1 + (cu + cv)) * (sky ? s : g), cap): element-wise IEEE operations in the
 * NumPy code's order (vectorised where the CPU can: the same results at any width). */
VECTORISED static void atmos_paths(double *restrict path, const double *restrict cu, double cvy, double gy, double sy,
                                   const int32_t *restrict sky, Py_ssize_t y, double cap, Py_ssize_t w) {
    for (Py_ssize_t x = 0; x < w; x++) {
        const double base = (sky != NULL && y < (Py_ssize_t)sky[x]) ? sy : gy;
        const double d = sqrt(1.0 + (cu[x] + cvy)) * base;
        path[x] = d > cap ? cap : d;
    }
}

/* One row's transmission-table indices per channel: k = min((int)(min(tau k_c, tau_max) nt + 0.5), kmax), the
 * NumPy code's operations in its order. */
VECTORISED static void atmos_trans(int32_t *restrict k3, const double *restrict tau, const double *restrict kc,
                                   double tau_max, double nt, Py_ssize_t kmax, Py_ssize_t w) {
    for (Py_ssize_t x = 0; x < w; x++) {
        for (int c = 0; c < 3; c++) {
            double tc = tau[x] * kc[c];
            tc = tc < tau_max ? tc : tau_max;
            const int32_t k = (int32_t)(tc * nt + 0.5);
            k3[3 * x + c] = k > (int32_t)kmax ? (int32_t)kmax : k;
        }
    }
}

/* atmos_haze(out u8|u16 (h,w,3), linear_out, src u8 (h,w,3), h, w, dec u16[256], enc u8[32768],
 *            rows f64 (3,h) = cv, beta z, beta H sky; cu f64 (w); sky_rows i32 (w) | None; density u16 (h,w) | None;
 *            mtab f64[65536] | None; cap; k0, k1, k2; nt; tau_max; kmax; ttab u16[kmax + 1]; shadow u16 (h,w) | None;
 *            tables i64 (2, 65536) | None (shadow scale, coat); use_shadow; use_coat; coat r, g, b; air r, g, b) */
static PyObject *atmos_haze(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_src, *o_dec, *o_enc, *o_rows, *o_cu, *o_sky, *o_den, *o_mtab, *o_ttab, *o_sh, *o_tab;
    int linear_out, use_shadow, use_coat;
    Py_ssize_t h, w, kmax;
    double cap, kc[3], nt, tau_max;
    long long coat[3], air[3];
    if (!PyArg_ParseTuple(args, "OiOnnOOOOOOOddddddnOOOiiLLLLLL", &o_out, &linear_out, &o_src, &h, &w, &o_dec,
                          &o_enc, &o_rows, &o_cu, &o_sky, &o_den, &o_mtab, &cap, &kc[0], &kc[1], &kc[2], &nt,
                          &tau_max, &kmax, &o_ttab, &o_sh, &o_tab, &use_shadow, &use_coat, &coat[0], &coat[1],
                          &coat[2], &air[0], &air[1], &air[2]))
        return NULL;
    int ok = h >= 1 && w >= 1 && kmax >= 0 && kmax < (1 << 30) && isfinite(nt) && nt > 0.0 && isfinite(tau_max) && tau_max >= 0.0 &&
             tau_max * nt + 0.5 < (double)kmax + 1.0 && !isnan(cap) && cap >= 0.0;
    for (int c = 0; c < 3; c++)
        ok = ok && isfinite(kc[c]) && kc[c] >= 0.0 && coat[c] >= 0 && coat[c] <= ATMOS_LINEAR_MAX && air[c] >= 0 &&
             air[c] <= ATMOS_LINEAR_MAX;
    ok = ok && (o_den == Py_None) == (o_mtab == Py_None);
    ok = ok && (!use_shadow || (o_sh != Py_None && o_tab != Py_None));
    ok = ok && (!use_coat || (o_den != Py_None && o_tab != Py_None));
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "atmos_haze: bad arguments");
        return NULL;
    }
    const Py_ssize_t n = mul(h, w);
    Buffers b = {.n = 0, .failed = 0};
    void *out = get(&b, o_out, mul(mul(n, 3), linear_out ? 2 : 1), 1, "out");
    const uint8_t *src = get(&b, o_src, mul(n, 3), 0, "src");
    const uint16_t *dec = get(&b, o_dec, 512, 0, "decode");
    const uint8_t *enc = get(&b, o_enc, 32768, 0, "encode");
    const double *rows = get(&b, o_rows, mul(mul(h, 3), 8), 0, "rows");
    const double *cu = get(&b, o_cu, mul(w, 8), 0, "cu");
    const int32_t *sky = o_sky == Py_None ? NULL : get(&b, o_sky, mul(w, 4), 0, "sky_rows");
    const uint16_t *den = o_den == Py_None ? NULL : get(&b, o_den, mul(n, 2), 0, "density");
    const double *mtab = o_mtab == Py_None ? NULL : get(&b, o_mtab, 65536 * 8, 0, "density table");
    const uint16_t *ttab = get(&b, o_ttab, mul(kmax + 1, 2), 0, "transmission table");
    const uint16_t *sh = use_shadow ? get(&b, o_sh, mul(n, 2), 0, "shadow") : NULL;
    const int64_t *tab = (use_shadow || use_coat) ? get(&b, o_tab, 2 * 65536 * 8, 0, "tables") : NULL;
    if (b.failed) { release(&b); return NULL; }
    for (Py_ssize_t q = 0; tab && q < 65536; q++) {
        if (tab[q] < 0 || tab[q] > 4 * ATMOS_ONE || tab[65536 + q] < 0 || tab[65536 + q] > ATMOS_ONE)
            return refuse(&b, PyExc_ValueError, "atmos_haze: shadow or coat table out of range");
    }
    for (Py_ssize_t q = 0; mtab && q < 65536; q++) {
        if (!isfinite(mtab[q]) || mtab[q] < 0.0)
            return refuse(&b, PyExc_ValueError, "atmos_haze: density table must be finite and >= 0");
    }
    /* Linear values and transmissions in their ranges keep every blend below 32768, the encode table's size. */
    for (int q = 0; q < 256; q++)
        if (dec[q] > ATMOS_LINEAR_MAX) return refuse(&b, PyExc_ValueError, "atmos_haze: decode table above 32767");
    for (Py_ssize_t q = 0; q <= kmax; q++)
        if (ttab[q] > ATMOS_ONE) return refuse(&b, PyExc_ValueError, "atmos_haze: transmission table above 2**15");
    for (Py_ssize_t y = 0; y < h; y++) {
        if (!isfinite(rows[y]) || !isfinite(rows[h + y]) || !isfinite(rows[2 * h + y]) || rows[y] < 0.0 ||
            rows[h + y] < 0.0 || rows[2 * h + y] < 0.0) {
            return refuse(&b, PyExc_ValueError, "atmos_haze: row geometry must be finite and >= 0");
        }
    }
    Scratch s = {.n = 0, .failed = 0};
    double *path = scratch(&s, w, sizeof(double), 0);
    int32_t *tq = scratch(&s, mul(3, w), sizeof(int32_t), 0);
    if (s.failed) return no_memory(&s, &b);
    Py_BEGIN_ALLOW_THREADS
    uint8_t *out8 = linear_out ? NULL : (uint8_t *)out;
    uint16_t *out16 = linear_out ? (uint16_t *)out : NULL;
    const int64_t *stab = tab, *ctab = tab ? tab + 65536 : NULL;
    for (Py_ssize_t y = 0; y < h; y++) {
        const double cvy = rows[y], gy = rows[h + y], sy = rows[2 * h + y];
        atmos_paths(path, cu, cvy, gy, sy, sky, y, cap, w);
        if (den) {
            const uint16_t *dr = den + y * w;
            for (Py_ssize_t x = 0; x < w; x++) path[x] = path[x] * mtab[dr[x]];
        }
        atmos_trans(tq, path, kc, tau_max, nt, kmax, w);
        for (Py_ssize_t x = 0; x < 3 * w; x++) tq[x] = ttab[tq[x]];
        const Py_ssize_t i0 = y * w;
        for (Py_ssize_t x = 0; x < w; x++) {
            const Py_ssize_t i = i0 + x;
            const int64_t s = use_shadow ? stab[sh[i]] : ATMOS_ONE;
            const int64_t cf = (use_coat && !(sky != NULL && y < (Py_ssize_t)sky[x])) ? ctab[den[i]] : 0;
            for (int c = 0; c < 3; c++) {
                const int64_t t = tq[3 * x + c];
                int64_t v = dec[src[3 * i + c]];
                if (use_shadow) {
                    v = (v * s + (1 << 14)) >> 15;
                    if (v > ATMOS_LINEAR_MAX) v = ATMOS_LINEAR_MAX;
                }
                if (use_coat) v = (v * (ATMOS_ONE - cf) + coat[c] * cf + (1 << 14)) >> 15;
                const int64_t o = (t * v + (ATMOS_ONE - t) * air[c] + (1 << 14)) >> 15;
                if (out16) out16[3 * i + c] = (uint16_t)o;
                else out8[3 * i + c] = enc[o];
            }
        }
    }
    Py_END_ALLOW_THREADS
    scratch_free(&s);
    release(&b);
    Py_RETURN_NONE;
}

/* atmos_cast(out u16 (n,3), src u8 (n,3), n, dec u16[256], g_r, g_g, g_b, glow u16 (n) | None, b_r, b_g, b_b):
 * v = min((dec(I) g_c + 2**14) >> 15, 32767); with glow q: v = min((v (2**15 + ((q b_c + 2**15) >> 16)) + 2**14) >> 15,
 * 32767). Gains in [0, 2**20] (checked), so every product fits int64. */
static PyObject *atmos_cast(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_src, *o_dec, *o_glow;
    Py_ssize_t n;
    long long g[3], bo[3];
    if (!PyArg_ParseTuple(args, "OOnOLLLOLLL", &o_out, &o_src, &n, &o_dec, &g[0], &g[1], &g[2], &o_glow, &bo[0],
                          &bo[1], &bo[2]))
        return NULL;
    int ok = n >= 0;
    for (int c = 0; c < 3; c++) ok = ok && g[c] >= 0 && g[c] <= (1 << 20) && bo[c] >= 0 && bo[c] <= (1LL << 30);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "atmos_cast: bad arguments");
        return NULL;
    }
    Buffers b = {.n = 0, .failed = 0};
    uint16_t *out = get(&b, o_out, mul(mul(n, 3), 2), 1, "out");
    const uint8_t *src = get(&b, o_src, mul(n, 3), 0, "src");
    const uint16_t *dec = get(&b, o_dec, 512, 0, "decode");
    const uint16_t *glow = o_glow == Py_None ? NULL : get(&b, o_glow, mul(n, 2), 0, "glow");
    if (b.failed) { release(&b); return NULL; }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        for (int c = 0; c < 3; c++) {
            int64_t v = ((int64_t)dec[src[3 * i + c]] * g[c] + (1 << 14)) >> 15;
            if (v > ATMOS_LINEAR_MAX) v = ATMOS_LINEAR_MAX;
            if (glow) {
                const int64_t extra = ((int64_t)glow[i] * bo[c] + (1 << 15)) >> 16;
                v = (v * (ATMOS_ONE + extra) + (1 << 14)) >> 15;
                if (v > ATMOS_LINEAR_MAX) v = ATMOS_LINEAR_MAX;
            }
            out[3 * i + c] = (uint16_t)v;
        }
    }
    Py_END_ALLOW_THREADS
    release(&b);
    Py_RETURN_NONE;
}

/* atmos_drops(layer u32 (h,w), h, w, n, ax, ay, ex, ey, inv_len2, inv_r2, peak (f64 n each), boxes i64 (4, n) =
 * x0, x1, y0, y1): for each drop and pixel (x, y) of its box, float64: dx = x - ax, dy = y - ay,
 * t = clip((dx ex + dy ey) inv_len2, 0, 1), qx = dx - t ex, qy = dy - t ey, u2 = (qx qx + qy qy) inv_r2; where
 * u2 < 1, layer += (int)(peak (1 - u2)(1 - u2) + 0.5), saturating at 2**24 (integers: order-free). */
static PyObject *atmos_drops(PyObject *self, PyObject *args) {
    PyObject *o_layer, *o_ax, *o_ay, *o_ex, *o_ey, *o_il, *o_ir, *o_pk, *o_box;
    Py_ssize_t h, w, n;
    if (!PyArg_ParseTuple(args, "OnnnOOOOOOOO", &o_layer, &h, &w, &n, &o_ax, &o_ay, &o_ex, &o_ey, &o_il, &o_ir,
                          &o_pk, &o_box))
        return NULL;
    if (h < 1 || w < 1 || n < 0) {
        PyErr_SetString(PyExc_ValueError, "atmos_drops: bad arguments");
        return NULL;
    }
    Buffers b = {.n = 0, .failed = 0};
    uint32_t *layer = get(&b, o_layer, mul(mul(h, w), 4), 1, "layer");
    const double *ax = get(&b, o_ax, mul(n, 8), 0, "ax");
    const double *ay = get(&b, o_ay, mul(n, 8), 0, "ay");
    const double *ex = get(&b, o_ex, mul(n, 8), 0, "ex");
    const double *ey = get(&b, o_ey, mul(n, 8), 0, "ey");
    const double *il = get(&b, o_il, mul(n, 8), 0, "inv_len2");
    const double *ir = get(&b, o_ir, mul(n, 8), 0, "inv_r2");
    const double *pk = get(&b, o_pk, mul(n, 8), 0, "peak");
    const int64_t *box = get(&b, o_box, mul(n, 32), 0, "boxes");
    if (b.failed) { release(&b); return NULL; }
    for (Py_ssize_t k = 0; k < n; k++) {
        const int64_t x0 = box[k], x1 = box[n + k], y0 = box[2 * n + k], y1 = box[3 * n + k];
        if (x0 < 0 || y0 < 0 || x1 > w || y1 > h || !(pk[k] >= 0.0 && pk[k] <= 65536.0))
            return refuse(&b, PyExc_ValueError, "atmos_drops: a box outside the layer or a peak outside [0, 2**16]");
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < n; k++) {
        const int64_t x0 = box[k], x1 = box[n + k], y0 = box[2 * n + k], y1 = box[3 * n + k];
        const double exk = ex[k], eyk = ey[k], ilk = il[k], irk = ir[k], pkk = pk[k];
        for (int64_t y = y0; y < y1; y++) {
            const double dy = (double)y - ay[k];
            uint32_t *row = layer + y * w;
            for (int64_t x = x0; x < x1; x++) {
                const double dx = (double)x - ax[k];
                double t = (dx * exk + dy * eyk) * ilk;
                t = t < 0.0 ? 0.0 : (t > 1.0 ? 1.0 : t);
                const double qx = dx - t * exk, qy = dy - t * eyk;
                const double u2 = (qx * qx + qy * qy) * irk;
                if (u2 < 1.0) {
                    const double g = 1.0 - u2;
                    const uint32_t wgt = (uint32_t)(pkk * (g * g) + 0.5);
                    const uint32_t s = row[x] + wgt;
                    row[x] = s > (1u << 24) ? (1u << 24) : s;
                }
            }
        }
    }
    Py_END_ALLOW_THREADS
    release(&b);
    Py_RETURN_NONE;
}

/* atmos_blend(out u8|u16 (n,3), srgb_out, lin u16 (n,3), layer u32 (n) | None, n, drop r, g, b, enc u8[32768]):
 * a = min(layer, 2**16) (0 without a layer); v = (lin (2**16 - a) + drop a + 2**15) >> 16; encoded when
 * srgb_out. */
static PyObject *atmos_blend(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_lin, *o_layer, *o_enc;
    int srgb_out;
    Py_ssize_t n;
    long long drop[3];
    if (!PyArg_ParseTuple(args, "OiOOnLLLO", &o_out, &srgb_out, &o_lin, &o_layer, &n, &drop[0], &drop[1], &drop[2],
                          &o_enc))
        return NULL;
    int ok = n >= 0;
    for (int c = 0; c < 3; c++) ok = ok && drop[c] >= 0 && drop[c] <= ATMOS_LINEAR_MAX;
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "atmos_blend: bad arguments");
        return NULL;
    }
    Buffers b = {.n = 0, .failed = 0};
    void *out = get(&b, o_out, mul(mul(n, 3), srgb_out ? 1 : 2), 1, "out");
    const uint16_t *lin = get(&b, o_lin, mul(mul(n, 3), 2), 0, "linear");
    const uint32_t *layer = o_layer == Py_None ? NULL : get(&b, o_layer, mul(n, 4), 0, "layer");
    const uint8_t *enc = get(&b, o_enc, 32768, 0, "encode");
    if (b.failed) { release(&b); return NULL; }
    for (Py_ssize_t i = 0; i < mul(n, 3); i++) {
        if (lin[i] > ATMOS_LINEAR_MAX) return refuse(&b, PyExc_ValueError, "atmos_blend: linear values above 32767");
    }
    Py_BEGIN_ALLOW_THREADS
    uint8_t *out8 = srgb_out ? (uint8_t *)out : NULL;
    uint16_t *out16 = srgb_out ? NULL : (uint16_t *)out;
    for (Py_ssize_t i = 0; i < n; i++) {
        const int64_t a = layer == NULL ? 0 : (layer[i] > 65536u ? 65536 : (int64_t)layer[i]);
        for (int c = 0; c < 3; c++) {
            const int64_t v = ((int64_t)lin[3 * i + c] * (65536 - a) + drop[c] * a + (1 << 15)) >> 16;
            if (out8) out8[3 * i + c] = enc[v];
            else out16[3 * i + c] = (uint16_t)v;
        }
    }
    Py_END_ALLOW_THREADS
    release(&b);
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------------------------------------------------
 * aegis-v2 water models (aegis_data/engine/water.py, glint.py, flood.py)
 * ------------------------------------------------------------------------------------------------------- */

/* exp(-x) for 0 <= x <= 700 from basic operations, as water.exp_neg: x = (k + f) ln 2, exp(-f ln 2) by a Taylor
 * polynomial of degree 13 in Horner form with the reciprocals 1/n as constants, times the exact power 2**-k. */
#define EXP_DEGREE 13
static const double exp_recip[EXP_DEGREE] = {
    1.0 / 13, 1.0 / 12, 1.0 / 11, 1.0 / 10, 1.0 / 9, 1.0 / 8, 1.0 / 7,
    1.0 / 6, 1.0 / 5, 1.0 / 4, 1.0 / 3, 1.0 / 2, 1.0 / 1,
};

static inline double exp_neg_exact(double x) {
    const double t = x * (1.0 / 0.6931471805599453);
    const double k = floor(t);
    const double r = (t - k) * 0.6931471805599453;
    double p = 1.0;
    for (int i = 0; i < EXP_DEGREE; i++) p = 1.0 - (r * exp_recip[i]) * p;
    /* 2**-k as its bit pattern (exact; k <= 1021 here, so p 2**-k is a normal number): the product is ldexp's. */
    const uint64_t bits = (uint64_t)(1023 - (int64_t)k) << 52;
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* Unpolarised Fresnel reflectance for incidence cosine c and refractive index n, as water.fresnel (one division). */
static inline double fresnel_exact(double c, double n) {
    const double g = sqrt((n * n - 1.0) + c * c);
    const double gm = g - c, gp = g + c;
    const double u = c * gp - 1.0, v = c * gm + 1.0;
    return ((0.5 * (gm * gm)) * (v * v + u * u)) / ((gp * gp) * (v * v));
}

/* One row of the glint loop, branch-free so it vectorises: every pixel's energy (0 where it is no water, its ray
 * does not reach the ground or its facet slope is beyond the cut), the float64 operations of glint._glint_terms
 * and _energy_strip in the same order (four divisions, three square roots). Inputs of masked-out pixels are
 * replaced before they could make a NaN reach a kept value (x -> 0, s.v -> 0, vz -> 1). */
VECTORISED
static void glint_row(double *restrict e, const uint8_t *restrict water, const uint32_t *restrict lot,
                      const double *restrict rxs, Py_ssize_t w, double ry, double rz, double gsd2_row,
                      double inv_footprint_row, const double *restrict k, double cut, double min_vz) {
    const double sx = k[0], sy = k[1], sz = k[2], inv_s2 = k[3], norm_p = k[4], k_g = k[5], k_lam = k[6];
    const double f = k[7], nw = k[8], k_e = k[9], q_max = k[10];
    const double nn1 = nw * nw - 1.0;
    const double area_row = gsd2_row * f;
    for (Py_ssize_t x = 0; x < w; x++) {
        const double rx = rxs[x];
        const double norm = sqrt((rx * rx + ry * ry) + rz * rz);
        const double inv = 1.0 / norm;
        const double vx = -(rx * inv), vy = -(ry * inv), vz = -(rz * inv);
        const double hx = sx + vx, hy = sy + vy, hz = sz + vz;
        const double t2 = (hx * hx + hy * hy) / (hz * hz);
        const double xs = t2 * inv_s2;
        const int ok = (water[x] != 0) & (vz > min_vz) & (xs <= cut);
        /* exp(-x) as exp_neg_exact, inline: 2**-k from its bit pattern */
        const double xa = ok ? xs : 0.0;
        const double t = xa * (1.0 / 0.6931471805599453);
        const double kf = floor(t);
        const double r = (t - kf) * 0.6931471805599453;
        double poly = 1.0;
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 13
#endif
        for (int i = 0; i < EXP_DEGREE; i++) poly = 1.0 - (r * exp_recip[i]) * poly;
        union { double d; uint64_t u; } kb = {.d = kf + 4503599627370496.0}, sc; /* 2**52: k in the low bits */
        sc.u = (1023 - (kb.u & 0xFFFFF)) << 52;
        const double p = (poly * sc.d) * norm_p;
        const double sdotv = (sx * vx + sy * vy) + sz * vz;
        const double c = sqrt((1.0 + (ok ? sdotv : 0.0)) * 0.5);
        const double g_ = sqrt(nn1 + c * c);
        const double gm = g_ - c, gp = g_ + c;
        const double fu = c * gp - 1.0, fv = c * gm + 1.0;
        const double rho = ((0.5 * (gm * gm)) * (fv * fv + fu * fu)) / ((gp * gp) * (fv * fv));
        const double vzs = ok ? vz : 1.0;
        const double inv_vz = 1.0 / vzs;
        const double sec2 = 1.0 + t2;
        const double q_raw = (p * (sec2 * sec2)) * inv_vz;
        const double q = q_raw < q_max ? q_raw : q_max;
        const double g = (rho * q) * k_g;
        const double lam = (q * k_lam) * (area_row * (inv * inv_vz));
        const double sparkle = (rho * k_e) * ((vzs * norm) * inv_footprint_row);
        /* Every value computed on every lane, then selected: a sparkle where the lottery hits. */
        const double hit = (double)lot[x] < lam * 4294967296.0 ? 1.0 : 0.0;
        const double ev = lam >= 1.0 ? g : hit * sparkle;
        e[x] = ok ? ev : 0.0;
    }
}

/* glint(out i64 (h + 2 pad, w + 2 pad), water u8 (h, w), lottery u32 (h, w), h, w, ray_x f64[w], ray_y f64[h],
 *       ray_z f64[h], gsd2 f64[h], inv_footprint f64[h], k f64[11] = (sx, sy, sz, 1/s2, 1/(pi s2), k_g, k_lambda,
 *       f, n, k_g / k_lambda, q_max), slope_cut, min_view_cos, linear_max, energy_cap, pad)
 * Each water pixel's sun-glint energy in linear units (glint_row per row), rounded half up after the cap:
 * floor(min(e linear_max, cap) + 0.5), written at (pad + y, pad + x) of out, (h + 2 pad) x (w + 2 pad) (the rest
 * is left as it is: zeros). Returns the bounding box (y0, y1, x0, x1) of the non-zero energies in region
 * coordinates, or None when there is none. */
static PyObject *glint(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_water, *o_lot, *o_rx, *o_ry, *o_rz, *o_g2, *o_fp, *o_k;
    Py_ssize_t h, w;
    double cut, min_vz, lmax, cap;
    Py_ssize_t pad;
    if (!PyArg_ParseTuple(args, "OOOnnOOOOOOddddn", &o_out, &o_water, &o_lot, &h, &w, &o_rx, &o_ry, &o_rz, &o_g2,
                          &o_fp, &o_k, &cut, &min_vz, &lmax, &cap, &pad)) return NULL;
    if (pad < 0 || pad > 1024) {
        PyErr_SetString(PyExc_ValueError, "glint: a padding of 0 to 1024 px");
        return NULL;
    }
    Buffers b = {.n = 0, .failed = 0};
    const Py_ssize_t n = mul(h, w), pw = w + 2 * pad;
    int64_t *out = get(&b, o_out, mul(8, mul(h + 2 * pad, pw)), 1, "out");
    const uint8_t *water = get(&b, o_water, n, 0, "water");
    const uint32_t *lot = get(&b, o_lot, mul(4, n), 0, "lottery");
    const double *rxs = get(&b, o_rx, mul(8, w), 0, "ray_x");
    const double *rys = get(&b, o_ry, mul(8, h), 0, "ray_y");
    const double *rzs = get(&b, o_rz, mul(8, h), 0, "ray_z");
    const double *g2 = get(&b, o_g2, mul(8, h), 0, "gsd2");
    const double *fp = get(&b, o_fp, mul(8, h), 0, "inv_footprint");
    const double *k = get(&b, o_k, 88, 0, "constants");
    if (b.failed) { release(&b); return NULL; }
    Scratch s = {.n = 0, .failed = 0};
    double *row = scratch(&s, w, sizeof(double), 0);
    if (s.failed) return no_memory(&s, &b);
    Py_ssize_t y0 = h, y1 = 0, x0 = w, x1 = 0; /* the bounding box of the lit pixels */
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t y = 0; y < h; y++) {
        const uint8_t *wr = water + y * w;
        Py_ssize_t any = 0;
        for (Py_ssize_t x = 0; x < w; x++) any |= wr[x];
        if (!any) continue;
        glint_row(row, wr, lot + y * w, rxs, w, rys[y], rzs[y], g2[y], fp[y], k, cut, min_vz);
        int64_t *o = out + (y + pad) * pw + pad;
        for (Py_ssize_t x = 0; x < w; x++) {
            if (row[x] == 0.0) continue;
            double v = row[x] * lmax;
            v = v < cap ? v : cap;
            o[x] = (int64_t)floor(v + 0.5);
            if (o[x] != 0) {
                y0 = y < y0 ? y : y0; y1 = y + 1 > y1 ? y + 1 : y1;
                x0 = x < x0 ? x : x0; x1 = x + 1 > x1 ? x + 1 : x1;
            }
        }
    }
    Py_END_ALLOW_THREADS
    scratch_free(&s);
    release(&b);
    if (y1 == 0) Py_RETURN_NONE;
    return Py_BuildValue("nnnn", y0, y1, x0, x1);
}

/* flood(out u8 (h, w, 3), img u8 (h, w, 3), depth i32 (h, w), h, w, water f64[3], sky f64[3], refl f64[h],
 *       trans f64[nt], nt, wet_mm, wet_darkening, decode u16[256], encode u8[LINEAR_MAX + 1], linear_max)
 * flood._blend_numpy per pixel: depth > 0: (1 - R) (T L + (1 - T) W) + R S with T = trans[min(depth, nt - 1)];
 * -wet < depth <= 0: L (1 - (1 - dark)(1 + depth / wet)); else the pixel unchanged. Rounded half up, clipped to
 * [0, linear_max], encoded. */
static PyObject *flood(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_img, *o_depth, *o_w, *o_s, *o_r, *o_t, *o_dec, *o_enc;
    Py_ssize_t h, w, nt;
    long wet;
    double dark, lmax;
    if (!PyArg_ParseTuple(args, "OOOnnOOOOnldOOd", &o_out, &o_img, &o_depth, &h, &w, &o_w, &o_s, &o_r, &o_t, &nt,
                          &wet, &dark, &o_dec, &o_enc, &lmax)) return NULL;
    if (nt < 1 || wet < 0 || !(lmax >= 1.0 && lmax <= 65535.0)) {
        PyErr_SetString(PyExc_ValueError,
                        "flood: a transmission table, a wet band >= 0 and a linear white up to 65535");
        return NULL;
    }
    Buffers b = {.n = 0, .failed = 0};
    const Py_ssize_t n = mul(h, w);
    uint8_t *out = get(&b, o_out, mul(3, n), 1, "out");
    const uint8_t *img = get(&b, o_img, mul(3, n), 0, "img");
    const int32_t *depth = get(&b, o_depth, mul(4, n), 0, "depth");
    const double *wc = get(&b, o_w, 24, 0, "water");
    const double *sc = get(&b, o_s, 24, 0, "sky");
    const double *refl = get(&b, o_r, mul(8, h), 0, "reflectance");
    const double *trans = get(&b, o_t, mul(8, nt), 0, "transmission");
    const uint16_t *dec = get(&b, o_dec, 512, 0, "decode");
    const uint8_t *enc = get(&b, o_enc, (Py_ssize_t)lmax + 1, 0, "encode");
    if (b.failed) { release(&b); return NULL; }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t y = 0; y < h; y++) {
        const double r = refl[y];
        for (Py_ssize_t x = 0; x < w; x++) {
            const Py_ssize_t i = y * w + x;
            const int32_t d = depth[i];
            const uint8_t *src = img + 3 * i;
            uint8_t *dst = out + 3 * i;
            if (d <= -wet || (wet == 0 && d <= 0)) {
                dst[0] = src[0]; dst[1] = src[1]; dst[2] = src[2];
                continue;
            }
            double t = 0.0, damp = 1.0;
            if (d > 0) {
                t = trans[(Py_ssize_t)d < nt - 1 ? (Py_ssize_t)d : nt - 1];
            } else {
                const double frac = 1.0 + (double)d / (double)wet;
                damp = 1.0 - (1.0 - dark) * frac;
            }
            for (int c = 0; c < 3; c++) {
                const double lin = (double)dec[src[c]];
                const double v = d > 0 ? (1.0 - r) * (t * lin + (1.0 - t) * wc[c]) + r * sc[c] : lin * damp;
                dst[c] = enc[table_index(floor(v + 0.5), lmax)];
            }
        }
    }
    Py_END_ALLOW_THREADS
    release(&b);
    Py_RETURN_NONE;
}

/* luma_hist(counts i64[lmax + 1] in/out, img u8 (n, 3), mask u8 (n), n, decode u16[256], luma_q15 i64[3], lmax)
 * counts[(L . q15 + 2**14) >> 15] += 1 for every masked pixel (flood._water_luma's integers). */
static PyObject *luma_hist(PyObject *self, PyObject *args) {
    PyObject *o_counts, *o_img, *o_mask, *o_dec, *o_q;
    Py_ssize_t n, lmax;
    if (!PyArg_ParseTuple(args, "OOOnOOn", &o_counts, &o_img, &o_mask, &n, &o_dec, &o_q, &lmax)) return NULL;
    if (lmax < 1 || lmax > 65535) {
        PyErr_SetString(PyExc_ValueError, "luma_hist: a linear white up to 65535");
        return NULL;
    }
    Buffers b = {.n = 0, .failed = 0};
    int64_t *counts = get(&b, o_counts, mul(8, lmax + 1), 1, "counts");
    const uint8_t *img = get(&b, o_img, mul(3, n), 0, "img");
    const uint8_t *mask = get(&b, o_mask, n, 0, "mask");
    const uint16_t *dec = get(&b, o_dec, 512, 0, "decode");
    const int64_t *q = get(&b, o_q, 24, 0, "luma weights");
    if (b.failed) { release(&b); return NULL; }
    for (int c = 0; c < 3; c++) {
        if (q[c] < 0 || q[c] > 32768)
            return refuse(&b, PyExc_ValueError, "luma_hist: weights in [0, 32768] summing to 32768");
    }
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!mask[i]) continue;
        const uint8_t *px = img + 3 * i;
        const int64_t luma = ((int64_t)dec[px[0]] * q[0] + (int64_t)dec[px[1]] * q[1] + (int64_t)dec[px[2]] * q[2]
                              + (1 << 14)) >> 15;
        if (luma > lmax) { bad = 1; break; }
        counts[luma] += 1;
    }
    Py_END_ALLOW_THREADS
    release(&b);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "luma_hist: a luma beyond the linear white (weights summing above 32768?)");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* turbid(out u8 (h, w, 3), img u8 (h, w, 3), water u8 (h, w), h, w, wcol f64[3], sky f64[3], refl f64[h], t,
 *        inv_median, decode u16[256], encode u8[LINEAR_MAX + 1], linear_max, luma_q15 i64[3])
 * flood.turbid_water per water pixel: luma = (L . q15 + 2**14) >> 15 (integers), m = min(luma inv_median, 2),
 * v = t L + (1 - t)((1 - R)(W m) + R S) (>= 0), rounded half up, clipped, encoded; other pixels unchanged. */
static PyObject *turbid(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_img, *o_water, *o_w, *o_s, *o_r, *o_dec, *o_enc, *o_q;
    Py_ssize_t h, w;
    double t, inv_median, lmax;
    if (!PyArg_ParseTuple(args, "OOOnnOOOddOOdO", &o_out, &o_img, &o_water, &h, &w, &o_w, &o_s, &o_r, &t,
                          &inv_median, &o_dec, &o_enc, &lmax, &o_q)) return NULL;
    if (!(inv_median > 0.0) || !(t >= 0.0 && t <= 1.0) || !(lmax >= 1.0 && lmax <= 65535.0)) {
        PyErr_SetString(PyExc_ValueError, "turbid: a positive median, t in [0, 1] and a linear white up to 65535");
        return NULL;
    }
    Buffers b = {.n = 0, .failed = 0};
    const Py_ssize_t n = mul(h, w);
    uint8_t *out = get(&b, o_out, mul(3, n), 1, "out");
    const uint8_t *img = get(&b, o_img, mul(3, n), 0, "img");
    const uint8_t *water = get(&b, o_water, n, 0, "water");
    const double *wc = get(&b, o_w, 24, 0, "water colour");
    const double *sc = get(&b, o_s, 24, 0, "sky");
    const double *refl = get(&b, o_r, mul(8, h), 0, "reflectance");
    const uint16_t *dec = get(&b, o_dec, 512, 0, "decode");
    const uint8_t *enc = get(&b, o_enc, (Py_ssize_t)lmax + 1, 0, "encode");
    const int64_t *q = get(&b, o_q, 24, 0, "luma weights");
    if (b.failed) { release(&b); return NULL; }
    for (int c = 0; c < 3; c++) {
        if (!(wc[c] >= 0.0 && sc[c] >= 0.0 && isfinite(wc[c]) && isfinite(sc[c])))
            return refuse(&b, PyExc_ValueError, "turbid: water and sky light must be finite and >= 0");
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t y = 0; y < h; y++) {
        const double r = refl[y];
        for (Py_ssize_t x = 0; x < w; x++) {
            const Py_ssize_t i = y * w + x;
            const uint8_t *src = img + 3 * i;
            uint8_t *dst = out + 3 * i;
            if (!water[i]) {
                dst[0] = src[0]; dst[1] = src[1]; dst[2] = src[2];
                continue;
            }
            const int64_t l0 = dec[src[0]], l1 = dec[src[1]], l2 = dec[src[2]];
            const int64_t luma = (l0 * q[0] + l1 * q[1] + l2 * q[2] + (1 << 14)) >> 15;
            double m = (double)luma * inv_median;
            m = m < 2.0 ? m : 2.0;
            const int64_t lins[3] = {l0, l1, l2};
            for (int c = 0; c < 3; c++) {
                const double turbid_c = (1.0 - r) * (wc[c] * m) + r * sc[c];
                /* >= 0.5 for reflectances in [0, 1]: truncation is the floor */
                const double v = (t * (double)lins[c] + (1.0 - t) * turbid_c) + 0.5;
                dst[c] = enc[table_index(v, lmax + 0.5)];
            }
        }
    }
    Py_END_ALLOW_THREADS
    release(&b);
    Py_RETURN_NONE;
}

/* chamfer(d i64 (h, w) in/out, cost i64 (h, w), h, w, passes, big, num, den): flood._chamfer_numpy's sweeps. Per
 * pass: forward rows (from the row above: vertical, main diagonal from x - 1, anti-diagonal from x + 1), backward
 * rows (from the row below, mirrored), each row then relaxed left to right and right to left; a blocked block
 * (cost >= big) stays big; stops after a pass that changes nothing. Steps: the mean of the two blocks' costs,
 * floored; diagonals times num / den, floored. Integers only: every sum is below 2**62. */
static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static PyObject *chamfer(PyObject *self, PyObject *args) {
    PyObject *o_d, *o_c;
    Py_ssize_t h, w;
    int passes;
    long long big_ll, num_ll, den_ll;
    if (!PyArg_ParseTuple(args, "OOnniLLL", &o_d, &o_c, &h, &w, &passes, &big_ll, &num_ll, &den_ll)) return NULL;
    if (big_ll <= 0 || big_ll > (1LL << 44) || num_ll <= 0 || num_ll > 1024 || den_ll <= 0 || den_ll > 1024) {
        PyErr_SetString(PyExc_ValueError, "chamfer: a bound in (0, 2**44] and a diagonal ratio of small integers");
        return NULL;
    }
    Buffers b = {.n = 0, .failed = 0};
    const Py_ssize_t n = mul(h, w);
    int64_t *d = get(&b, o_d, mul(8, n), 1, "distance");
    const int64_t *c = get(&b, o_c, mul(8, n), 0, "cost");
    if (b.failed) { release(&b); return NULL; }
    const int64_t big = (int64_t)big_ll, num = (int64_t)num_ll, den = (int64_t)den_ll;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (c[i] < 0 || c[i] > big) return refuse(&b, PyExc_ValueError, "chamfer: costs must lie in [0, big]");
    }
    Scratch s = {.n = 0, .failed = 0};
    int64_t *row = scratch(&s, w, sizeof(int64_t), 0);
    int64_t *before = scratch(&s, n, sizeof(int64_t), 0);
    if (s.failed) return no_memory(&s, &b);
    Py_BEGIN_ALLOW_THREADS
    for (int pass = 0; pass < passes; pass++) {
        memcpy(before, d, (size_t)n * sizeof(int64_t));
        for (int dir = 0; dir < 2; dir++) {
            for (Py_ssize_t k = 0; k < h; k++) {
                const Py_ssize_t y = dir == 0 ? k : h - 1 - k;
                const Py_ssize_t prev = dir == 0 ? y - 1 : y + 1;
                const int64_t *cy = c + y * w;
                for (Py_ssize_t x = 0; x < w; x++) row[x] = d[y * w + x];
                if (prev >= 0 && prev < h) {
                    const int64_t *p = d + prev * w, *cp = c + prev * w;
                    for (Py_ssize_t x = 0; x < w; x++) {
                        row[x] = min64(row[x], p[x] + (cy[x] + cp[x]) / 2);
                        if (x > 0) { /* up-left (forward) or down-left (backward) */
                            const int64_t s = (cy[x] + cp[x - 1]) / 2 * num / den;
                            row[x] = min64(row[x], p[x - 1] + s);
                        }
                        if (x + 1 < w) { /* up-right (forward) or down-right (backward) */
                            const int64_t s = (cy[x] + cp[x + 1]) / 2 * num / den;
                            row[x] = min64(row[x], p[x + 1] + s);
                        }
                    }
                }
                for (Py_ssize_t x = 1; x < w; x++) row[x] = min64(row[x], row[x - 1] + (cy[x] + cy[x - 1]) / 2);
                for (Py_ssize_t x = w - 2; x >= 0; x--) row[x] = min64(row[x], row[x + 1] + (cy[x] + cy[x + 1]) / 2);
                for (Py_ssize_t x = 0; x < w; x++) d[y * w + x] = cy[x] >= big ? big : min64(row[x], big);
            }
        }
        if (memcmp(before, d, (size_t)n * sizeof(int64_t)) == 0) break;
    }
    Py_END_ALLOW_THREADS
    scratch_free(&s);
    release(&b);
    Py_RETURN_NONE;
}


/* glint_add(out u8 (h, w, 3) in/out, sums f64 (sh, sw), sh, sw, row0, reach, scale, h, w, tint f64[3],
 *           decode u16[256], encode u8[lmax + 1], lmax, cores u8 (h, w) out)
 * glint.add_glint: for region rows y = row0 + k inside the region and every column x, light = sums[k, x + reach]
 * scale; where light > 0, per channel v = floor(light tint_c + 0.5) + L (float64), a core where any channel
 * exceeds lmax, the channel clipped to lmax and encoded. Returns the cores' bounding box (y0, y1, x0, x1) or None. */
static PyObject *glint_add(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_sums, *o_tint, *o_dec, *o_enc, *o_cores;
    Py_ssize_t sh, sw, row0, reach, h, w;
    double scale, lmax;
    if (!PyArg_ParseTuple(args, "OOnnnndnnOOOdO", &o_out, &o_sums, &sh, &sw, &row0, &reach, &scale, &h, &w, &o_tint,
                          &o_dec, &o_enc, &lmax, &o_cores)) return NULL;
    if (sh < 0 || reach < 0 || sw != w + 2 * reach || !(lmax >= 1.0 && lmax <= 65535.0)) {
        PyErr_SetString(PyExc_ValueError,
                        "glint_add: sums as wide as the region and its reach, a linear white up to 65535");
        return NULL;
    }
    Buffers b = {.n = 0, .failed = 0};
    uint8_t *out = get(&b, o_out, mul(3, mul(h, w)), 1, "out");
    const double *sums = get(&b, o_sums, mul(8, mul(sh, sw)), 0, "sums");
    const double *tint = get(&b, o_tint, 24, 0, "tint");
    const uint16_t *dec = get(&b, o_dec, 512, 0, "decode");
    const uint8_t *enc = get(&b, o_enc, (Py_ssize_t)lmax + 1, 0, "encode");
    uint8_t *cores = get(&b, o_cores, mul(h, w), 1, "cores");
    if (b.failed) { release(&b); return NULL; }
    Py_ssize_t cy0 = h, cy1 = 0, cx0 = w, cx1 = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < sh; k++) {
        const Py_ssize_t y = row0 + k;
        if (y < 0 || y >= h) continue;
        const double *srow = sums + k * sw + reach;
        for (Py_ssize_t x = 0; x < w; x++) {
            const double light = srow[x] * scale;
            if (!(light > 0.0)) continue;
            const Py_ssize_t i = y * w + x;
            uint8_t *px = out + 3 * i;
            int core = 0;
            for (int c = 0; c < 3; c++) {
                const double v = floor(light * tint[c] + 0.5) + (double)dec[px[c]];
                core |= v > lmax;
                px[c] = enc[table_index(v, lmax)];
            }
            if (core) {
                cores[i] = 1;
                cy0 = y < cy0 ? y : cy0; cy1 = y + 1 > cy1 ? y + 1 : cy1;
                cx0 = x < cx0 ? x : cx0; cx1 = x + 1 > cx1 ? x + 1 : cx1;
            }
        }
    }
    Py_END_ALLOW_THREADS
    release(&b);
    if (cy1 == 0) Py_RETURN_NONE;
    return Py_BuildValue("nnnn", cy0, cy1, cx0, cx1);
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
    {"taps", taps, METH_VARARGS, "aegis-v2 trajectory blur: integer taps per row band, reflect border"},
    {"raw_noise", raw_noise, METH_VARARGS, "aegis-v2 low_light: raw sensor noise, demosaic, tone curve"},
    {"chroma", chroma, METH_VARARGS, "aegis-v2 low_light: YCbCr, chroma denoise and 4:2:0, RGB"},
    {"glint", glint, METH_VARARGS, "aegis-v2 water_glare: sun-glint energy per water pixel"},
    {"glint_add", glint_add, METH_VARARGS, "aegis-v2 water_glare: glint added in linear light, saturated cores"},
    {"flood", flood, METH_VARARGS, "aegis-v2 inundation: turbid water, shoreline and wet band in linear light"},
    {"turbid", turbid, METH_VARARGS, "aegis-v2 turbidity_cast: the colour of sediment-laden water"},
    {"luma_hist", luma_hist, METH_VARARGS, "aegis-v2 turbidity_cast: histogram of the water's linear luma"},
    {"chamfer", chamfer, METH_VARARGS, "aegis-v2 inundation: integer geodesic heights over the block grid"},
    {"lut_u8_u16", lut_u8_u16, METH_VARARGS, "uint8 -> uint16 table lookup (the sRGB decode)"},
    {"set_isa", set_isa, METH_VARARGS, "tests: the highest instruction set the taps loop may use"},
    {"atmos_haze", atmos_haze, METH_VARARGS, "aegis-v2 atmosphere: haze along each sight line, shadow, dust coat"},
    {"atmos_cast", atmos_cast, METH_VARARGS, "aegis-v2 fire_warm_tint: firelight colour gains and glow, linear"},
    {"atmos_drops", atmos_drops, METH_VARARGS, "aegis-v2 rain_streaks: near raindrops' weights (integers)"},
    {"atmos_blend", atmos_blend, METH_VARARGS, "aegis-v2 rain_streaks: near raindrops blended, encoded"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ckernels", "Compiled corruption-engine loops", -1, methods};

PyMODINIT_FUNC PyInit__ckernels(void) { return PyModule_Create(&module); }
