/*
 * Compiled conversion of parsed inputs (module aegis_eval.protocols._cinputs, beside predictions.py, whose Python
 * twins _gt_columns_py and _duplicate_rows_py define every value here; AEGIS_KERNELS=numpy runs those).
 *
 * Python interface:
 *   gt_columns(annotations: list, keep: tuple[int, ...], default_category: int | None)
 *       -> (kept, categories, image_ids, boxes, areas, crowd, ann_ids) | None
 *     The annotations of a parsed COCO GT whose category is in keep, as native-endian bytes: kept (int64, the
 *     annotation's index in the list), categories, image_ids (int64), boxes (float64, 4 per annotation, x y w h),
 *     areas (float64, NaN where 'area' is absent or not an int/float), crowd (uint8, the truth of 'iscrowd', 0
 *     where absent) and ann_ids (int64, index + 1 where 'id' is absent). None for anything the well-formed path
 *     does not take: an entry that is not exactly a dict, a category (or default) that is not exactly an int or
 *     lies outside int64; for a kept annotation, a missing image_id or bbox, an image_id or id not exactly an int
 *     inside int64, a bbox not exactly a list of four exact ints/floats, a number beyond float64. The caller then
 *     runs the per-annotation checks, which accept the file or name its problem.
 *   duplicate_rows(det_image: int64 buffer, boxes: float64 buffer (4 per row), scores: float64 buffer) -> int
 *     How many rows repeat an earlier row bit for bit (image row as a float64, box, score); releases the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static PyObject *KEY_CATEGORY, *KEY_IMAGE, *KEY_BBOX, *KEY_ID, *KEY_AREA, *KEY_CROWD;

/* An exact int inside int64 into *out: 1; 0 when the value is not one (no Python error left set). */
static int exact_int64(PyObject *v, int64_t *out) {
    if (!PyLong_CheckExact(v)) return 0;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow) return 0;
    *out = (int64_t)x;
    return 1;
}

/* An exact int or float as a float64 (an int rounded as float() rounds it): 1; 0 for another type or an int
 * beyond float64 (no Python error left set). */
static int exact_number(PyObject *v, double *out) {
    if (PyFloat_CheckExact(v)) {
        *out = PyFloat_AS_DOUBLE(v);
        return 1;
    }
    if (!PyLong_CheckExact(v)) return 0;
    double x = PyLong_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    *out = x;
    return 1;
}

/* A dict's value for key, borrowed; NULL with *error set when the lookup raised. */
static PyObject *lookup(PyObject *dict, PyObject *key, int *error) {
    PyObject *v = PyDict_GetItemWithError(dict, key);
    if (v == NULL && PyErr_Occurred()) *error = 1;
    return v;
}

typedef struct {
    int64_t *kept, *cats, *images, *ids;
    double *boxes, *areas;
    uint8_t *crowd;
} GtColumns;

static void free_columns(GtColumns *c) {
    PyMem_Free(c->kept);
    PyMem_Free(c->cats);
    PyMem_Free(c->images);
    PyMem_Free(c->ids);
    PyMem_Free(c->boxes);
    PyMem_Free(c->areas);
    PyMem_Free(c->crowd);
}

/* 1: converted (*count kept); 0: not the well-formed form; -1: a Python error is set. */
static int convert(PyObject *anns, const int64_t *keep, Py_ssize_t n_keep, PyObject *default_cat, GtColumns *c,
                   Py_ssize_t *count) {
    Py_ssize_t n = PyList_GET_SIZE(anns), m = 0;
    int error = 0;
    /* every category is checked (the twin makes one array of them all) before any kept annotation is read */
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *a = PyList_GET_ITEM(anns, k);
        if (!PyDict_CheckExact(a)) return 0;
        PyObject *cat = lookup(a, KEY_CATEGORY, &error);
        if (error) return -1;
        int64_t cat_id;
        if (!exact_int64(cat != NULL ? cat : default_cat, &cat_id)) return 0;
        int kept = 0;
        for (Py_ssize_t j = 0; j < n_keep && !kept; j++) kept = keep[j] == cat_id;
        if (kept) {
            c->kept[m] = k;
            c->cats[m] = cat_id;
            m++;
        }
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        Py_ssize_t k = (Py_ssize_t)c->kept[i];
        PyObject *a = PyList_GET_ITEM(anns, k);
        PyObject *image = lookup(a, KEY_IMAGE, &error);
        PyObject *bbox = error ? NULL : lookup(a, KEY_BBOX, &error);
        PyObject *id = error ? NULL : lookup(a, KEY_ID, &error);
        PyObject *area = error ? NULL : lookup(a, KEY_AREA, &error);
        PyObject *crowd = error ? NULL : lookup(a, KEY_CROWD, &error);
        if (error) return -1;
        if (image == NULL || bbox == NULL || !exact_int64(image, &c->images[i])) return 0;
        if (!PyList_CheckExact(bbox) || PyList_GET_SIZE(bbox) != 4) return 0;
        for (int j = 0; j < 4; j++) {
            if (!exact_number(PyList_GET_ITEM(bbox, j), &c->boxes[4 * i + j])) return 0;
        }
        if (id == NULL) {
            c->ids[i] = (int64_t)k + 1;
        } else if (!exact_int64(id, &c->ids[i])) {
            return 0;
        }
        c->areas[i] = NAN;
        if (area != NULL && (PyFloat_CheckExact(area) || PyLong_CheckExact(area)) &&
            !exact_number(area, &c->areas[i])) {
            return 0;
        }
        int truth = crowd == NULL ? 0 : PyObject_IsTrue(crowd);
        if (truth < 0) return -1;
        c->crowd[i] = (uint8_t)truth;
    }
    *count = m;
    return 1;
}

static PyObject *py_gt_columns(PyObject *self, PyObject *args) {
    PyObject *anns, *keep_obj, *default_cat;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!O", &PyList_Type, &anns, &PyTuple_Type, &keep_obj, &default_cat)) return NULL;
    Py_ssize_t n_keep = PyTuple_GET_SIZE(keep_obj), n = PyList_GET_SIZE(anns);
    int64_t *keep = PyMem_Malloc((size_t)(n_keep + 1) * sizeof(int64_t));
    if (keep == NULL) return PyErr_NoMemory();
    for (Py_ssize_t j = 0; j < n_keep; j++) {
        if (!exact_int64(PyTuple_GET_ITEM(keep_obj, j), &keep[j])) {
            PyMem_Free(keep);
            PyErr_SetString(PyExc_TypeError, "gt_columns: keep must hold int64 category ids");
            return NULL;
        }
    }
    size_t rows = (size_t)(n + 1);
    GtColumns c = {PyMem_Malloc(rows * 8), PyMem_Malloc(rows * 8), PyMem_Malloc(rows * 8), PyMem_Malloc(rows * 8),
                   PyMem_Malloc(rows * 32), PyMem_Malloc(rows * 8), PyMem_Malloc(rows)};
    PyObject *out = NULL;
    if (!c.kept || !c.cats || !c.images || !c.ids || !c.boxes || !c.areas || !c.crowd) {
        PyErr_NoMemory();
    } else {
        Py_ssize_t m = 0;
        int status = convert(anns, keep, n_keep, default_cat, &c, &m);
        if (status == 1) {
            out = Py_BuildValue("(y#y#y#y#y#y#y#)", (const char *)c.kept, m * 8, (const char *)c.cats, m * 8,
                                (const char *)c.images, m * 8, (const char *)c.boxes, m * 32, (const char *)c.areas,
                                m * 8, (const char *)c.crowd, m, (const char *)c.ids, m * 8);
        } else if (status == 0) {
            out = Py_NewRef(Py_None);
        }
    }
    free_columns(&c);
    PyMem_Free(keep);
    return out;
}

/* --- duplicate detections ------------------------------------------------------------------------------------ */
/* Row i's six words as the twin's table holds them: the image row as a float64, the box, the score. */
static void row_words(const int64_t *image, const double *boxes, const double *scores, Py_ssize_t i, uint64_t w[6]) {
    double as_float = (double)image[i];
    memcpy(&w[0], &as_float, 8);
    memcpy(&w[1], &boxes[4 * i], 32);
    memcpy(&w[5], &scores[i], 8);
}

static uint64_t row_hash(const uint64_t w[6]) {
    uint64_t h = 0;
    for (int k = 0; k < 6; k++) {
        h = (h ^ w[k]) * 0x9E3779B97F4A7C15ULL;
        h ^= h >> 29;
    }
    return h;
}

/* Rows of [start, end) repeating an earlier row of that range, with slots (size a power of 2 at least twice the
 * range, all -1) as an open-addressing set of row indices; left all -1 again. */
static Py_ssize_t range_duplicates(const int64_t *image, const double *boxes, const double *scores, Py_ssize_t start,
                                   Py_ssize_t end, int32_t *slots, size_t size) {
    Py_ssize_t repeats = 0;
    for (Py_ssize_t i = start; i < end; i++) {
        uint64_t w[6], other[6];
        row_words(image, boxes, scores, i, w);
        size_t s = (size_t)row_hash(w) & (size - 1);
        for (;;) {
            int32_t j = slots[s];
            if (j < 0) {
                slots[s] = (int32_t)i;
                break;
            }
            row_words(image, boxes, scores, j, other);
            if (memcmp(w, other, sizeof(w)) == 0) {
                repeats++;
                break;
            }
            s = (s + 1) & (size - 1);
        }
    }
    memset(slots, 0xff, size * sizeof(int32_t)); /* empty again for the next range */
    return repeats;
}

/* Rows repeating an earlier one; -1 when out of memory (n < 2**31, checked by the caller). Identical rows share
 * their image, so where the images come in runs (a file lists each image's detections together) and are exact
 * as float64 (|row| <= 2**53, so equal floats mean equal rows), each run is counted on its own in a small
 * cache-resident table; otherwise one table holds all rows. */
static Py_ssize_t count_duplicates(const int64_t *image, const double *boxes, const double *scores, Py_ssize_t n) {
    int sorted = 1;
    Py_ssize_t longest = 0, run = 0;
    for (Py_ssize_t i = 0; i < n && sorted; i++) {
        sorted = image[i] <= (1LL << 53) && image[i] >= -(1LL << 53) && (i == 0 || image[i] >= image[i - 1]);
        run = i > 0 && image[i] == image[i - 1] ? run + 1 : 1;
        if (run > longest) longest = run;
    }
    Py_ssize_t span = sorted ? longest : n;
    size_t size = 16;
    while (size < (size_t)span * 2) size <<= 1;
    int32_t *slots = malloc(size * sizeof(int32_t));
    if (!slots) return -1;
    memset(slots, 0xff, size * sizeof(int32_t)); /* -1: empty */
    Py_ssize_t repeats = 0;
    if (!sorted) {
        repeats = range_duplicates(image, boxes, scores, 0, n, slots, size);
    } else {
        for (Py_ssize_t start = 0; start < n;) {
            Py_ssize_t end = start + 1;
            while (end < n && image[end] == image[start]) end++;
            size_t used = 16;
            while (used < (size_t)(end - start) * 2) used <<= 1;
            repeats += range_duplicates(image, boxes, scores, start, end, slots, used);
            start = end;
        }
    }
    free(slots);
    return repeats;
}

static PyObject *py_duplicate_rows(PyObject *self, PyObject *args) {
    Py_buffer image, boxes, scores;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*", &image, &boxes, &scores)) return NULL;
    PyObject *out = NULL;
    Py_ssize_t n = image.len / 8;
    if (image.len % 8 || boxes.len != n * 32 || scores.len != n * 8 || n >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "duplicate_rows: need n < 2**31 int64 images, 4n float64 box values, n scores");
    } else {
        Py_ssize_t repeats;
        Py_BEGIN_ALLOW_THREADS;
        repeats = count_duplicates(image.buf, boxes.buf, scores.buf, n);
        Py_END_ALLOW_THREADS;
        out = repeats < 0 ? PyErr_NoMemory() : PyLong_FromSsize_t(repeats);
    }
    PyBuffer_Release(&image);
    PyBuffer_Release(&boxes);
    PyBuffer_Release(&scores);
    return out;
}

static PyMethodDef methods[] = {
    {"gt_columns", py_gt_columns, METH_VARARGS,
     "gt_columns(annotations, keep, default_category) -> (kept, categories, image_ids, boxes, areas, crowd, "
     "ann_ids) as bytes, or None"},
    {"duplicate_rows", py_duplicate_rows, METH_VARARGS, "duplicate_rows(det_image, boxes, scores) -> int"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cinputs",
                                    "Compiled conversion of parsed inputs of aegis_eval.protocols.predictions.", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cinputs(void) {
    KEY_CATEGORY = PyUnicode_InternFromString("category_id");
    KEY_IMAGE = PyUnicode_InternFromString("image_id");
    KEY_BBOX = PyUnicode_InternFromString("bbox");
    KEY_ID = PyUnicode_InternFromString("id");
    KEY_AREA = PyUnicode_InternFromString("area");
    KEY_CROWD = PyUnicode_InternFromString("iscrowd");
    if (!KEY_CATEGORY || !KEY_IMAGE || !KEY_BBOX || !KEY_ID || !KEY_AREA || !KEY_CROWD) return NULL;
    return PyModule_Create(&module);
}
