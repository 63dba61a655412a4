/*
 * Compiled byte screen of the strict JSON reader (module aegis_data.files._cjson, beside readers.py, whose
 * _long_integer_free on the folded bytes defines the answer; AEGIS_KERNELS=numpy runs that).
 *
 * Python interface:
 *   long_integer_free(data: bytes) -> bool
 *     Whether data holds no run of 19 or more digits except right after a '.', where '+' bytes are skipped as if
 *     deleted (a run continues across them, and the byte before a run is the last byte before it that is not a
 *     '+'). One pass, without the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* A digit or a '+': the bytes a run spans (a '+' is skipped as if deleted). */
static int in_run(unsigned char b) { return (b >= '0' && b <= '9') || b == '+'; }

/* Such a run holds 19 digits only inside 19 consecutive run bytes, so the search looks at every 19th byte and
 * steps back from a run byte to the last byte that is not one (Boyer-Moore style); only a stretch of 19 or more
 * run bytes is read whole: its digits counted and the byte before it (before its first digit, as '+' bytes are
 * skipped) compared with '.'. */
static int long_integer_free(const unsigned char *p, Py_ssize_t n) {
    Py_ssize_t i = 18; /* the last byte of the 19-byte window looked at */
    while (i < n) {
        if (!in_run(p[i])) {
            i += 19;
            continue;
        }
        Py_ssize_t j = i - 1;
        while (j > i - 19 && in_run(p[j])) j--;
        if (j > i - 19) { /* p[j] ends every window that holds it: the next one starts after it */
            i = j + 19;
            continue;
        }
        Py_ssize_t start = i - 18, end = i + 1;
        while (start > 0 && in_run(p[start - 1])) start--;
        while (end < n && in_run(p[end])) end++;
        Py_ssize_t digits = 0;
        for (Py_ssize_t k = start; k < end; k++) digits += p[k] != '+';
        /* the byte before the first digit, skipping '+': the byte before the stretch, which is not a '+' */
        if (digits >= 19 && !(start > 0 && p[start - 1] == '.')) return 0;
        i = end + 19;
    }
    return 1;
}

static PyObject *py_long_integer_free(PyObject *self, PyObject *args) {
    Py_buffer buf;
    int free_of_them;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*", &buf)) return NULL;
    Py_BEGIN_ALLOW_THREADS;
    free_of_them = long_integer_free((const unsigned char *)buf.buf, buf.len);
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&buf);
    return PyBool_FromLong(free_of_them);
}

static PyMethodDef methods[] = {
    {"long_integer_free", py_long_integer_free, METH_VARARGS, "long_integer_free(data) -> bool"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cjson",
                                    "Compiled byte screen of aegis_data.files.readers.", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cjson(void) { return PyModule_Create(&module); }
