/*
 * Compiled inner loop of the AP bootstrap (module aegis_eval.metrics._cbootstrap, beside bootstrap.py and the NumPy
 * code it mirrors: bootstrap_ap, _chunk_precisions, _block_points, _precision_at_recalls).
 *
 * For every resample row and IoU threshold it builds the same candidate points as the NumPy code (the last TP of
 * each run, and the points of mixed tie blocks copy by copy), with the same weighted TP and FP counts, then the
 * interpolated precision at every recall threshold. Why the values are those of the NumPy path, bit for bit:
 *
 *   - the counts are sums of integer multiplicities held in doubles (every partial sum < 2**53), so they are exact
 *     whatever the order of additions;
 *   - the precision is tp / ((fp + tp) + eps), the same three correctly rounded operations in the same order; no
 *     contraction (the pragma below and -ffp-contract=off in setup.py), no -ffast-math;
 *   - the envelope is a running maximum and the pick a first-index search on nondecreasing TP counts, both exact.
 *
 * Resample rows are the innermost dimension (the weights arrive transposed, images x rows), so the walks along the
 * detection lists add whole vectors of rows at a time. Arrays arrive through the buffer protocol as flat,
 * C-contiguous memory; bootstrap.py checks dtypes, shapes and index ranges, and the sizes are checked again here.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && !defined(AEGIS_NO_CLONES)
/* Also compiled for AVX2 (wider vectors; no FMA: the avx2 target does not enable it, and contraction is off), chosen
 * at load time by the CPU; element-wise IEEE operations give the same results at any vector width. */
#define VECTORISED __attribute__((target_clones("avx2", "default")))
#else
#define VECTORISED
#endif

/* Rows handled together: the lane width of every walk (bounds the per-chunk buffers to points x LANES doubles). */
#define LANES 32
/* Five arrays and up to 16 per IoU threshold (at most 16 thresholds). */
#define MAX_BUFFERS (5 + 16 * 16)

typedef struct {
    Py_buffer views[MAX_BUFFERS];
    int n;
} Buffers;

static void release(Buffers *b) {
    for (int i = 0; i < b->n; i++) PyBuffer_Release(&b->views[i]);
    b->n = 0;
}

/* A C-contiguous buffer of `count` items of `itemsize` bytes (writable if asked), or NULL with an exception set. */
static void *get(Buffers *b, PyObject *obj, Py_ssize_t count, Py_ssize_t itemsize, int writable, const char *what) {
    if (b->n >= MAX_BUFFERS) {
        PyErr_SetString(PyExc_RuntimeError, "too many buffers");
        return NULL;
    }
    Py_buffer *v = &b->views[b->n];
    if (PyObject_GetBuffer(obj, v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return NULL;
    b->n++;
    if (count < 0 || v->itemsize != itemsize || v->len != count * itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd items of %zd bytes", what, count, itemsize);
        return NULL;
    }
    return v->buf;
}

static Py_ssize_t length(PyObject *obj) {
    Py_buffer v;
    if (PyObject_GetBuffer(obj, &v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    Py_ssize_t n = v.itemsize ? v.len / v.itemsize : -1;
    PyBuffer_Release(&v);
    return n;
}

/* One IoU threshold's static layout (bootstrap._ThresholdPlan, flattened): int64 arrays. */
typedef struct {
    Py_ssize_t n_tp, n_end, n_ig, n_blk, n_pt;
    const int64_t *tp_image, *run_end, *end_col, *end_position, *ig_image, *ig_before;
    const int64_t *blk_image, *blk_col, *blk_start, *blk_tp_before, *blk_ig_before, *blk_tp, *blk_fp;
    const int64_t *pt_start, *pt_tp, *pt_fp;
    int64_t copies;
} Plan;

static int parse_plan(Buffers *b, PyObject *t, Plan *p, Py_ssize_t n_images, Py_ssize_t n_cols) {
    PyObject *o[16];
    long long copies;
    if (!PyArg_ParseTuple(t, "OOOOOOOOOOOOOOOOL", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8],
                          &o[9], &o[10], &o[11], &o[12], &o[13], &o[14], &o[15], &copies))
        return -1;
    p->n_tp = length(o[0]);
    p->n_end = length(o[1]);
    p->n_ig = length(o[4]);
    p->n_blk = length(o[6]);
    p->n_pt = length(o[14]);
    if (p->n_tp < 0 || p->n_end < 0 || p->n_ig < 0 || p->n_blk < 0 || p->n_pt < 0 || copies < 0) return -1;
    p->copies = copies;
    const int64_t **dst[16] = {&p->tp_image,  &p->run_end,       &p->end_col,       &p->end_position,
                               &p->ig_image,  &p->ig_before,     &p->blk_image,     &p->blk_col,
                               &p->blk_start, &p->blk_tp_before, &p->blk_ig_before, &p->blk_tp,
                               &p->blk_fp,    &p->pt_start,      &p->pt_tp,         &p->pt_fp};
    Py_ssize_t n[16] = {p->n_tp,  p->n_end, p->n_end, p->n_end, p->n_ig, p->n_end, p->n_blk,     p->n_blk,
                        p->n_blk, p->n_blk, p->n_blk, p->n_blk, p->n_blk, p->n_blk + 1, p->n_pt, p->n_pt};
    for (int i = 0; i < 16; i++)
        if (!(*dst[i] = get(b, o[i], n[i], 8, 0, "plan array"))) return -1;
    /* indices stay inside the arrays they index (bootstrap.py builds them so; checked, never trusted) */
    for (Py_ssize_t i = 0; i < p->n_tp; i++)
        if (p->tp_image[i] < 0 || p->tp_image[i] >= n_images) goto bad;
    for (Py_ssize_t i = 0; i < p->n_ig; i++)
        if (p->ig_image[i] < 0 || p->ig_image[i] >= n_images) goto bad;
    for (Py_ssize_t i = 0; i < p->n_end; i++)
        if (p->run_end[i] < 0 || p->run_end[i] >= p->n_tp || p->end_col[i] < 0 || p->end_col[i] >= n_cols ||
            p->ig_before[i] < 0 || p->ig_before[i] > p->n_ig)
            goto bad;
    for (Py_ssize_t i = 0; i < p->n_blk; i++)
        if (p->blk_image[i] < 0 || p->blk_image[i] >= n_images || p->blk_col[i] < -1 || p->blk_col[i] >= n_cols ||
            p->blk_tp_before[i] < 0 || p->blk_tp_before[i] > p->n_tp || p->blk_ig_before[i] < 0 ||
            p->blk_ig_before[i] > p->n_ig || p->pt_start[i] < 0 || p->pt_start[i] >= p->pt_start[i + 1])
            goto bad;
    if (p->n_blk ? p->pt_start[p->n_blk] != p->n_pt : p->pt_start[0] != 0) goto bad;
    return 0;
bad:
    PyErr_SetString(PyExc_ValueError, "bootstrap plan index out of range");
    return -1;
}

/* The work of ap_precisions on checked buffers; rows is a multiple of LANES (the caller pads). */
VECTORISED
static void precisions(double *q, const double *wt, Py_ssize_t rows, Py_ssize_t begin, Py_ssize_t end,
                       const int64_t *det, Py_ssize_t n_det,
                       const int64_t *cols, Py_ssize_t n_cols, const double *need, Py_ssize_t n_rec, const Plan *plan,
                       Py_ssize_t n_thr, double *colv, double *ptp, double *pfp) {
    const double eps = 2.220446049250313e-16; /* np.spacing(1) */
    for (Py_ssize_t r0 = begin; r0 < end; r0 += LANES) {
        double acc[LANES], tpa[LANES], iga[LANES];
        /* running count of all kept detections, read at the columns */
        memset(acc, 0, sizeof acc);
        Py_ssize_t k = 0;
        for (Py_ssize_t d = 0; d < n_det && k < n_cols; d++) {
            const double *w = wt + det[d] * rows + r0;
            for (int j = 0; j < LANES; j++) acc[j] += w[j];
            if (cols[k] == d) memcpy(colv + k++ * LANES, acc, sizeof acc);
        }
        for (Py_ssize_t t = 0; t < n_thr; t++) {
            const Plan *p = &plan[t];
            memset(tpa, 0, sizeof tpa);
            memset(iga, 0, sizeof iga);
            Py_ssize_t tpn = 0, ign = 0, e = 0, m = 0, n = 0;
            while (e < p->n_end || m < p->n_blk) {
                if (m >= p->n_blk || (e < p->n_end && p->end_position[e] < p->blk_start[m])) {
                    for (; tpn <= p->run_end[e]; tpn++) {
                        const double *w = wt + p->tp_image[tpn] * rows + r0;
                        for (int j = 0; j < LANES; j++) tpa[j] += w[j];
                    }
                    for (; ign < p->ig_before[e]; ign++) {
                        const double *w = wt + p->ig_image[ign] * rows + r0;
                        for (int j = 0; j < LANES; j++) iga[j] += w[j];
                    }
                    const double *all = colv + p->end_col[e] * LANES;
                    double *tp = ptp + n * LANES, *fp = pfp + n * LANES;
                    for (int j = 0; j < LANES; j++) {
                        tp[j] = tpa[j];
                        fp[j] = all[j] - tpa[j] - iga[j];
                    }
                    n++, e++;
                    continue;
                }
                for (; tpn < p->blk_tp_before[m]; tpn++) {
                    const double *w = wt + p->tp_image[tpn] * rows + r0;
                    for (int j = 0; j < LANES; j++) tpa[j] += w[j];
                }
                for (; ign < p->blk_ig_before[m]; ign++) {
                    const double *w = wt + p->ig_image[ign] * rows + r0;
                    for (int j = 0; j < LANES; j++) iga[j] += w[j];
                }
                const double *kw = wt + p->blk_image[m] * rows + r0;
                const double btp = (double)p->blk_tp[m], bfp = (double)p->blk_fp[m];
                const int64_t first = p->pt_start[m], last = p->pt_start[m + 1] - 1;
                for (int64_t c = 0; c < p->copies; c++) {
                    for (int64_t l = first; l <= last; l++) {
                        double *tp = ptp + n * LANES, *fp = pfp + n * LANES;
                        for (int j = 0; j < LANES; j++) {
                            const double before = p->blk_col[m] >= 0 ? colv[p->blk_col[m] * LANES + j] : 0.0;
                            const double f0 = before - tpa[j] - iga[j], kj = kw[j];
                            double tin = 0.0, fin = 0.0;
                            if (kj > 0.0) {
                                if ((double)c < kj) {
                                    tin = (double)c * btp + (double)p->pt_tp[l];
                                    fin = (double)c * bfp + (double)p->pt_fp[l];
                                } else {
                                    tin = (kj - 1.0) * btp + (double)p->pt_tp[last];
                                    fin = (kj - 1.0) * bfp + (double)p->pt_fp[last];
                                }
                            }
                            tp[j] = tpa[j] + tin;
                            fp[j] = f0 + fin;
                        }
                        n++;
                    }
                }
                m++;
            }
            if (n == 0) {
                for (int j = 0; j < LANES; j++) memset(q + ((r0 + j) * n_thr + t) * n_rec, 0, sizeof(double) * n_rec);
                continue;
            }
            /* One backward pass: the precision at each point, its envelope (the running maximum from the right),
             * and the picks. Recall threshold r takes the envelope at the first point whose TP count reaches its
             * need; the TP counts never decrease along the points and the needs never decrease along r, so walking
             * back, r is answered at the point i where tp[i-1] < need[r] <= tp[i]. Thresholds that no point reaches
             * get 0. Lanes are innermost, and the scalar answering runs only at points where some lane has one. */
            double env[LANES], cur[LANES];
            Py_ssize_t next[LANES];
            const double *last_tp = ptp + (n - 1) * LANES;
            for (int j = 0; j < LANES; j++) {
                const double *nd = need + (r0 + j) * n_rec;
                double *out = q + ((r0 + j) * n_thr + t) * n_rec;
                Py_ssize_t r = n_rec - 1;
                for (; r >= 0 && nd[r] > last_tp[j]; r--) out[r] = 0.0;
                next[j] = r;
                cur[j] = r >= 0 ? nd[r] : -1.0;
                env[j] = 0.0;
            }
            for (Py_ssize_t i = n - 1; i >= 0; i--) {
                const double *tp = ptp + i * LANES, *fp = pfp + i * LANES;
                const double *prev = i ? tp - LANES : NULL;
                int any = 0;
                for (int j = 0; j < LANES; j++) {
                    double s = fp[j] + tp[j];
                    s += eps;
                    const double pr = tp[j] / s;
                    env[j] = pr > env[j] ? pr : env[j];
                    any |= cur[j] > (prev ? prev[j] : -1.0);
                }
                if (!any) continue;
                for (int j = 0; j < LANES; j++) {
                    const double before = prev ? prev[j] : -1.0;
                    if (!(cur[j] > before)) continue;
                    const double *nd = need + (r0 + j) * n_rec;
                    double *out = q + ((r0 + j) * n_thr + t) * n_rec;
                    Py_ssize_t r = next[j];
                    for (; r >= 0 && nd[r] > before; r--) out[r] = env[j];
                    next[j] = r;
                    cur[j] = r >= 0 ? nd[r] : -1.0;
                }
            }
        }
    }
}

/* q(rows, T, R) interpolated precision of the resample rows [begin, end); see bootstrap._chunk_precisions. The GIL
 * is released: callers may run disjoint row ranges of the same arrays on several threads.
 * Arguments: q (rows*T*R doubles, written), wt (images*rows doubles: weights transposed), rows, images,
 * det_image (D int64, accumulation order), columns (K int64, sorted positions whose running count is read),
 * need (rows*R doubles: required TP counts), n_recall, plans (tuple of T plan tuples), begin, end (row range). */
static PyObject *ap_precisions(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o_q, *o_wt, *o_det, *o_cols, *o_need, *plans;
    Py_ssize_t rows, images, n_rec, begin, end;
    if (!PyArg_ParseTuple(args, "OOnnOOOnO!nn", &o_q, &o_wt, &rows, &images, &o_det, &o_cols, &o_need, &n_rec,
                          &PyTuple_Type, &plans, &begin, &end))
        return NULL;
    Py_ssize_t n_thr = PyTuple_GET_SIZE(plans);
    Py_ssize_t n_det = length(o_det), n_cols = length(o_cols);
    if (rows < 0 || images < 0 || n_rec < 0 || n_det < 0 || n_cols < 0 || n_thr > 16) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bad sizes");
        return NULL;
    }
    Buffers b = {.n = 0};
    Plan plan[16];
    double *q = get(&b, o_q, rows * n_thr * n_rec, 8, 1, "q");
    const double *wt = q ? get(&b, o_wt, images * rows, 8, 0, "wt") : NULL;
    const int64_t *det = wt ? get(&b, o_det, n_det, 8, 0, "det_image") : NULL;
    const int64_t *cols = det ? get(&b, o_cols, n_cols, 8, 0, "columns") : NULL;
    const double *need = cols ? get(&b, o_need, rows * n_rec, 8, 0, "need") : NULL;
    if (!need) goto fail;
    for (Py_ssize_t d = 0; d < n_det; d++)
        if (det[d] < 0 || det[d] >= images) {
            PyErr_SetString(PyExc_ValueError, "detection image out of range");
            goto fail;
        }
    for (Py_ssize_t k = 0; k < n_cols; k++)
        if (cols[k] < 0 || cols[k] >= n_det || (k && cols[k] <= cols[k - 1])) {
            PyErr_SetString(PyExc_ValueError, "columns must be increasing positions");
            goto fail;
        }
    Py_ssize_t max_pts = 0;
    for (Py_ssize_t t = 0; t < n_thr; t++) {
        if (parse_plan(&b, PyTuple_GET_ITEM(plans, t), &plan[t], images, n_cols) < 0) goto fail;
        Py_ssize_t pts = plan[t].n_end + plan[t].n_pt * (Py_ssize_t)plan[t].copies;
        if (pts > max_pts) max_pts = pts;
    }
    double *colv = malloc(sizeof(double) * (size_t)(n_cols ? n_cols : 1) * LANES);
    double *ptp = malloc(sizeof(double) * (size_t)(max_pts ? max_pts : 1) * LANES);
    double *pfp = malloc(sizeof(double) * (size_t)(max_pts ? max_pts : 1) * LANES);
    if (!colv || !ptp || !pfp) {
        free(colv), free(ptp), free(pfp);
        PyErr_NoMemory();
        goto fail;
    }
    if (rows % LANES || begin % LANES || end % LANES || begin < 0 || end < begin || end > rows) {
        PyErr_SetString(PyExc_ValueError, "rows and the row range must be multiples of the lane width");
        free(colv), free(ptp), free(pfp);
        goto fail;
    }
    Py_BEGIN_ALLOW_THREADS;
    precisions(q, wt, rows, begin, end, det, n_det, cols, n_cols, need, n_rec, plan, n_thr, colv, ptp, pfp);
    Py_END_ALLOW_THREADS;
    free(colv), free(ptp), free(pfp);
    release(&b);
    Py_RETURN_NONE;
fail:
    release(&b);
    return NULL;
}

static PyObject *lanes(PyObject *self, PyObject *args) {
    (void)self, (void)args;
    return PyLong_FromLong(LANES);
}

static PyMethodDef methods[] = {
    {"lanes", lanes, METH_NOARGS, "Rows handled together: ap_precisions takes a multiple of this many."},
    {"ap_precisions", ap_precisions, METH_VARARGS, "Interpolated precision of every bootstrap row (bootstrap.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cbootstrap", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cbootstrap(void) { return PyModule_Create(&module); }
