/*
 * Compiled COCO matching (module aegis_eval.metrics._cmatch, beside coco.py, whose NumPy code it mirrors).
 *
 * evaluate_images in coco.py defines the result: the candidate (detection, GT) pairs of an image whose IoU reaches
 * the lowest IoU threshold (candidate_pairs: the same float operations in the same order, so the same IoU bits),
 * then pycocotools' greedy matching for every area range and IoU threshold (_match_areas). This file runs the
 * reference's loop itself, per image, over each detection's candidates only: a GT below the lowest threshold can
 * never be chosen, and leaving it out of the loop changes neither the best match nor where the loop stops.
 * Tests compare both paths on random and adversarial inputs (tests/eval/metrics/test_cmatch.py).
 *
 * match_threshold below is the greedy pass of matching.py's match_at_threshold (one IoU, highest IoU first).
 *
 * Python interface (every array C-contiguous, native-endian):
 *   match_areas(det_boxes, det_start, gt_boxes, gt_start, gt_crowd, ann_nonzero, gt_ignore, gt_pos, thresholds,
 *               floor, matched, match_ignored) -> None
 *     det_boxes (D, 4) float64 xywh, grouped by image row, each image's in rank order; det_start (I + 1) int64;
 *     gt_boxes (G, 4) float64 xywh, grouped by image row, each image's in file order; gt_start (I + 1) int64;
 *     gt_crowd, ann_nonzero (G) uint8; gt_ignore (A, G) uint8 and gt_pos (A, G) int64 (the reference's GT order
 *     per area range: regular first, then file order), in the same GT order; thresholds (T) float64, each already
 *     clamped below 1 as the reference does; floor: the lowest threshold; matched, match_ignored (A, T, D) uint8,
 *     zero on entry, written.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t g; /* GT index (into the gt arrays) */
    double iou;
} Cand;

static int get(PyObject *obj, Py_buffer *view, int writable, Py_ssize_t bytes, const char *name) {
    if (PyObject_GetBuffer(obj, view, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS) < 0) return 0;
    if (view->len != bytes) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd bytes, got %zd", name, bytes, view->len);
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

/* len[k] = the byte length of objs[which[k]]'s C-contiguous buffer, for k < n: the sizes every entry point derives
 * from the arrays it is given. -1 with the exception set when one has no such buffer. */
static int byte_lengths(PyObject **objs, const int *which, int n, Py_ssize_t *len) {
    for (int k = 0; k < n; k++) {
        Py_buffer probe;
        if (PyObject_GetBuffer(objs[which[k]], &probe, PyBUF_C_CONTIGUOUS) < 0) return -1;
        len[k] = probe.len;
        PyBuffer_Release(&probe);
    }
    return 0;
}

static PyObject *py_match_areas(PyObject *self, PyObject *args) {
    PyObject *o[11];
    double floor_iou;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOdOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8],
                          &floor_iou, &o[9], &o[10]))
        return NULL;
    Py_buffer v[11];
    int got = 0;
    PyObject *result = NULL;
    /* sizes from the shapes the caller promises: D from det_boxes, I from det_start, G from gt_boxes, T, A */
    static const int sized[] = {0, 1, 2, 8, 6};  /* the arrays whose lengths give the sizes */
    Py_ssize_t len[5];
    if (byte_lengths(o, sized, 5, len) < 0) return NULL;
    Py_ssize_t D = len[0] / 32;
    Py_ssize_t I = len[1] / 8 - 1;
    Py_ssize_t G = len[2] / 32;
    Py_ssize_t T = len[3] / 8;
    Py_ssize_t A = G ? len[4] / G : 0;
    if (I < 0 || A <= 0 || T <= 0) {
        PyErr_SetString(PyExc_ValueError, "match_areas: empty image table, area ranges or thresholds");
        return NULL;
    }
    const Py_ssize_t bytes[11] = {D * 32, (I + 1) * 8, G * 32, (I + 1) * 8, G, G, A * G, A * G * 8, T * 8,
                                  A * T * D, A * T * D};
    static const char *const names[11] = {"det_boxes", "det_start", "gt_boxes",   "gt_start", "gt_crowd", "ann_nonzero",
                                          "gt_ignore", "gt_pos",    "thresholds", "matched",  "match_ignored"};
    for (; got < 11; got++) {
        if (!get(o[got], &v[got], got >= 9, bytes[got], names[got])) goto done;
    }
    {
        const double *db = v[0].buf, *gb = v[2].buf, *thr = v[8].buf;
        const int64_t *ds = v[1].buf, *gs = v[3].buf, *gpos = v[7].buf;
        const uint8_t *crowd = v[4].buf, *nonzero = v[5].buf, *ign = v[6].buf;
        uint8_t *matched = v[9].buf, *mign = v[10].buf;
        Py_ssize_t max_g = 0, max_d = 0;
        for (Py_ssize_t i = 0; i < I; i++) {
            if (ds[i] < 0 || ds[i + 1] < ds[i] || ds[i + 1] > D || gs[i] < 0 || gs[i + 1] < gs[i] || gs[i + 1] > G) {
                PyErr_SetString(PyExc_ValueError, "match_areas: det_start / gt_start are not offsets into the arrays");
                goto done;
            }
            if (gs[i + 1] - gs[i] > max_g) max_g = gs[i + 1] - gs[i];
            if (ds[i + 1] - ds[i] > max_d) max_d = ds[i + 1] - ds[i];
        }
        /* per image: each detection's candidates (at most G_i), their count, and the taken flags */
        Cand *cand = PyMem_Malloc((size_t)(max_d * max_g + 1) * sizeof(Cand));
        Cand *sorted = PyMem_Malloc((size_t)(max_d * max_g + 1) * sizeof(Cand));
        Py_ssize_t *n_cand = PyMem_Malloc((size_t)(max_d + 1) * sizeof(Py_ssize_t));
        uint8_t *taken = PyMem_Malloc((size_t)(max_g + 1));
        if (!cand || !sorted || !n_cand || !taken) {
            PyMem_Free(cand);
            PyMem_Free(sorted);
            PyMem_Free(n_cand);
            PyMem_Free(taken);
            PyErr_NoMemory();
            goto done;
        }
        /* the loops touch only the held buffers: other threads run meanwhile (a sweep's resamples) */
        Py_BEGIN_ALLOW_THREADS;
        for (Py_ssize_t i = 0; i < I; i++) {
            const Py_ssize_t d0 = ds[i], nd = ds[i + 1] - ds[i], g0 = gs[i], ng = gs[i + 1] - gs[i];
            if (nd == 0 || ng == 0) continue;
            /* candidate_pairs' expression, operation for operation */
            for (Py_ssize_t k = 0; k < nd; k++) {
                const double *d = db + 4 * (d0 + k);
                const double dx0 = d[0], dy0 = d[1], dx1 = d[2] + dx0, dy1 = d[3] + dy0, da = d[2] * d[3];
                Py_ssize_t n = 0;
                for (Py_ssize_t j = 0; j < ng; j++) {
                    const double *g = gb + 4 * (g0 + j);
                    const double gx0 = g[0], gy0 = g[1], gx1 = g[2] + gx0, gy1 = g[3] + gy0;
                    const double w = (dx1 < gx1 ? dx1 : gx1) - (dx0 > gx0 ? dx0 : gx0);
                    if (!(w > 0)) continue;
                    const double h = (dy1 < gy1 ? dy1 : gy1) - (dy0 > gy0 ? dy0 : gy0);
                    const double inter = w * h;
                    const double ga = g[2] * g[3];
                    const double uni = crowd[g0 + j] ? da : da + ga - inter;
                    const double iou = inter / uni;
                    if (h > 0 && iou >= floor_iou) {
                        cand[k * ng + n].g = g0 + j;
                        cand[k * ng + n].iou = iou;
                        n++;
                    }
                }
                n_cand[k] = n;
            }
            for (Py_ssize_t a = 0; a < A; a++) {
                const int64_t *pos = gpos + a * G;
                const uint8_t *ig = ign + a * G;
                /* each detection's candidates in the reference's GT order for this area range (insertion sort: few) */
                for (Py_ssize_t k = 0; k < nd; k++) {
                    Cand *out = sorted + k * ng;
                    for (Py_ssize_t c = 0; c < n_cand[k]; c++) {
                        Cand x = cand[k * ng + c];
                        Py_ssize_t q = c;
                        while (q > 0 && pos[out[q - 1].g] > pos[x.g]) {
                            out[q] = out[q - 1];
                            q--;
                        }
                        out[q] = x;
                    }
                }
                for (Py_ssize_t t = 0; t < T; t++) {
                    memset(taken, 0, (size_t)ng);
                    uint8_t *m_out = matched + (a * T + t) * D, *i_out = mign + (a * T + t) * D;
                    for (Py_ssize_t k = 0; k < nd; k++) {
                        const Py_ssize_t n = n_cand[k];
                        if (n == 0) continue;
                        const Cand *mine = sorted + k * ng;
                        double best_iou = thr[t];
                        int64_t best = -1;
                        for (Py_ssize_t c = 0; c < n; c++) {
                            const int64_t g = mine[c].g;
                            if (taken[g - g0] && !crowd[g]) continue;
                            if (best > -1 && !ig[best] && ig[g]) break;
                            if (mine[c].iou < best_iou) continue;
                            best_iou = mine[c].iou;
                            best = g;
                        }
                        if (best < 0) continue;
                        m_out[d0 + k] = nonzero[best];
                        i_out[d0 + k] = ig[best];
                        taken[best - g0] = 1;
                    }
                }
            }
        }
        Py_END_ALLOW_THREADS;
        PyMem_Free(cand);
        PyMem_Free(sorted);
        PyMem_Free(n_cand);
        PyMem_Free(taken);
    }
    result = Py_NewRef(Py_None);
done:
    for (int k = 0; k < got; k++) PyBuffer_Release(&v[k]);
    return result;
}

/* match_threshold(det_boxes, det_start, gt_boxes, gt_start, gt_crowd, iou, row_gt, row_iou, crowd_hit) -> None
 *
 * The greedy pass of matching.py's match_at_threshold: per image, detections in the given (score) order; each takes
 * the free non-crowd GT with the highest IoU >= iou, the lowest GT position on a tie (candidate_pairs' IoU, the same
 * float operations). Writes row_gt (int64, GT position into gt_boxes or -1), row_iou (float64, written where
 * matched) and crowd_hit (uint8: a crowd GT reaches iou). Arrays as in match_areas; outputs preset by the caller. */
static PyObject *py_match_threshold(PyObject *self, PyObject *args) {
    PyObject *o[8];
    double floor_iou;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOdOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &floor_iou, &o[5], &o[6], &o[7]))
        return NULL;
    static const int sized[] = {0, 1, 2};  /* the arrays whose lengths give the sizes */
    Py_ssize_t len[3];
    if (byte_lengths(o, sized, 3, len) < 0) return NULL;
    Py_ssize_t D = len[0] / 32;
    Py_ssize_t I = len[1] / 8 - 1;
    Py_ssize_t G = len[2] / 32;
    if (I < 0) {
        PyErr_SetString(PyExc_ValueError, "match_threshold: empty image table");
        return NULL;
    }
    const Py_ssize_t bytes[8] = {D * 32, (I + 1) * 8, G * 32, (I + 1) * 8, G, D * 8, D * 8, D};
    static const char *const names[8] = {"det_boxes", "det_start", "gt_boxes", "gt_start",
                                         "gt_crowd",  "row_gt",    "row_iou",  "crowd_hit"};
    Py_buffer v[8];
    int got = 0;
    PyObject *result = NULL;
    uint8_t *taken = NULL;
    for (; got < 8; got++) {
        if (!get(o[got], &v[got], got >= 5, bytes[got], names[got])) goto done;
    }
    {
        const double *db = v[0].buf, *gb = v[2].buf;
        const int64_t *ds = v[1].buf, *gs = v[3].buf;
        const uint8_t *crowd = v[4].buf;
        int64_t *row_gt = v[5].buf;
        double *row_iou = v[6].buf;
        uint8_t *crowd_hit = v[7].buf;
        for (Py_ssize_t i = 0; i < I; i++) {
            if (ds[i] < 0 || ds[i + 1] < ds[i] || ds[i + 1] > D || gs[i] < 0 || gs[i + 1] < gs[i] || gs[i + 1] > G) {
                PyErr_SetString(PyExc_ValueError, "match_threshold: det_start / gt_start are not offsets");
                goto done;
            }
        }
        taken = PyMem_Calloc((size_t)G + 1, 1);
        if (!taken) {
            PyErr_NoMemory();
            goto done;
        }
        Py_BEGIN_ALLOW_THREADS;
        for (Py_ssize_t i = 0; i < I; i++) {
            const Py_ssize_t g0 = gs[i], g1 = gs[i + 1];
            if (g0 == g1) continue;
            for (Py_ssize_t k = ds[i]; k < ds[i + 1]; k++) {
                const double *d = db + 4 * k;
                const double dx0 = d[0], dy0 = d[1], dx1 = d[2] + dx0, dy1 = d[3] + dy0, da = d[2] * d[3];
                Py_ssize_t best = -1;
                double best_iou = 0.0;
                for (Py_ssize_t j = g0; j < g1; j++) {
                    if (taken[j]) continue;
                    const double *g = gb + 4 * j;
                    const double gx0 = g[0], gy0 = g[1], gx1 = g[2] + gx0, gy1 = g[3] + gy0;
                    const double w = (dx1 < gx1 ? dx1 : gx1) - (dx0 > gx0 ? dx0 : gx0);
                    if (!(w > 0)) continue;
                    const double h = (dy1 < gy1 ? dy1 : gy1) - (dy0 > gy0 ? dy0 : gy0);
                    const double inter = w * h;
                    const double ga = g[2] * g[3];
                    const double uni = crowd[j] ? da : da + ga - inter;
                    const double iou = inter / uni;
                    if (!(h > 0 && iou >= floor_iou)) continue;
                    if (crowd[j]) {
                        crowd_hit[k] = 1;
                    } else if (best < 0 || iou > best_iou) {
                        best = j;
                        best_iou = iou;
                    }
                }
                if (best >= 0) {
                    taken[best] = 1;
                    row_gt[k] = best;
                    row_iou[k] = best_iou;
                }
            }
        }
        Py_END_ALLOW_THREADS;
    }
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(taken);
    for (int k = 0; k < got; k++) PyBuffer_Release(&v[k]);
    return result;
}

/* precision(matched, ignored, rows, n_pos, recall_thresholds, out) -> None
 *
 * coco.py's precision_at_recall for every area range and IoU threshold of an ApTable: detections visited in the
 * accumulation order ``rows``; at each true positive k (1-based) recall k / n_pos and precision k / ((fp + k) + eps),
 * fp the false positives before it, exactly the NumPy expressions; the precision made monotone from the right and
 * read at the first true positive whose recall reaches each recall threshold (0 where none does). matched, ignored
 * (A, T, D) uint8; rows (N) int64 in [0, D); n_pos (A) int64 (an area range with 0 is left as it is); recall
 * thresholds (R) float64; out (A, T, R) float64, zero on entry. */
static PyObject *py_precision(PyObject *self, PyObject *args) {
    PyObject *o[6];
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5])) return NULL;
    static const int sized[] = {2, 3, 4, 5, 0};  /* the arrays whose lengths give the sizes */
    Py_ssize_t len[5];
    if (byte_lengths(o, sized, 5, len) < 0) return NULL;
    Py_ssize_t N = len[0] / 8;
    Py_ssize_t A = len[1] / 8;
    Py_ssize_t R = len[2] / 8;
    Py_ssize_t T = (A && R) ? len[3] / 8 / (A * R) : 0;
    Py_ssize_t D = (A && T) ? len[4] / (A * T) : 0;
    if (A <= 0 || T <= 0 || R <= 0) {
        PyErr_SetString(PyExc_ValueError, "precision: empty area ranges, thresholds or recall thresholds");
        return NULL;
    }
    const Py_ssize_t bytes[6] = {A * T * D, A * T * D, N * 8, A * 8, R * 8, A * T * R * 8};
    static const char *const names[6] = {"matched", "ignored", "rows", "n_pos", "recall_thresholds", "out"};
    Py_buffer v[6];
    int got = 0;
    PyObject *result = NULL;
    double *rc = NULL, *pr = NULL;
    for (; got < 6; got++) {
        if (!get(o[got], &v[got], got == 5, bytes[got], names[got])) goto done;
    }
    {
        const uint8_t *matched = v[0].buf, *ignored = v[1].buf;
        const int64_t *rows = v[2].buf, *n_pos = v[3].buf;
        const double *rthr = v[4].buf;
        double *out = v[5].buf;
        for (Py_ssize_t k = 0; k < N; k++) {
            if (rows[k] < 0 || rows[k] >= D) {
                PyErr_SetString(PyExc_ValueError, "precision: rows outside the detections");
                goto done;
            }
        }
        rc = PyMem_Malloc((size_t)(N + 1) * sizeof(double));
        pr = PyMem_Malloc((size_t)(N + 1) * sizeof(double));
        if (!rc || !pr) {
            PyErr_NoMemory();
            goto done;
        }
        const double eps = 2.220446049250313e-16; /* np.spacing(1) */
        Py_BEGIN_ALLOW_THREADS;
        for (Py_ssize_t a = 0; a < A; a++) {
            if (n_pos[a] == 0) continue;
            const double npos = (double)n_pos[a];
            for (Py_ssize_t t = 0; t < T; t++) {
                const uint8_t *m = matched + (a * T + t) * D, *ig = ignored + (a * T + t) * D;
                Py_ssize_t tp = 0, fp = 0;
                for (Py_ssize_t k = 0; k < N; k++) {
                    const int64_t r = rows[k];
                    if (ig[r]) continue;
                    if (m[r]) {
                        tp++;
                        const double tps = (double)tp;
                        rc[tp - 1] = tps / npos;
                        pr[tp - 1] = tps / ((double)fp + tps + eps);
                    } else {
                        fp++;
                    }
                }
                for (Py_ssize_t k = tp - 1; k > 0; k--) {
                    if (pr[k] > pr[k - 1]) pr[k - 1] = pr[k];
                }
                double *q = out + (a * T + t) * R;
                Py_ssize_t k = 0;
                for (Py_ssize_t j = 0; j < R; j++) { /* searchsorted(rc, thresholds, 'left'): rc and thresholds rise */
                    while (k < tp && rc[k] < rthr[j]) k++;
                    if (k < tp) q[j] = pr[k];
                }
            }
        }
        Py_END_ALLOW_THREADS;
    }
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(rc);
    PyMem_Free(pr);
    for (int k = 0; k < got; k++) PyBuffer_Release(&v[k]);
    return result;
}

static PyMethodDef methods[] = {
    {"precision", py_precision, METH_VARARGS,
     "precision(matched, ignored, rows, n_pos, recall_thresholds, out) -> None"},
    {"match_threshold", py_match_threshold, METH_VARARGS,
     "match_threshold(det_boxes, det_start, gt_boxes, gt_start, gt_crowd, iou, row_gt, row_iou, crowd_hit) -> None"},
    {"match_areas", py_match_areas, METH_VARARGS,
     "match_areas(det_boxes, det_start, gt_boxes, gt_start, gt_crowd, ann_nonzero, gt_ignore, gt_pos, thresholds, "
     "floor, matched, match_ignored) -> None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cmatch", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cmatch(void) { return PyModule_Create(&module); }
