/* What every compiler kernel (the C modules beside the Python they speed up) shares: the
 * check of a buffer's item type, growable arrays, and the compile's deadline. Only the
 * Python C API and the C library are used. */
#ifndef FSMCOMPILE_KERNEL_H
#define FSMCOMPILE_KERNEL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <time.h>

/* Whether a buffer holds native signed integers of `size` bytes ('i', 'l' or 'q', maybe
 * after a byte-order mark); for size 1, bools or bytes. */
static inline int kernel_is_int(const Py_buffer *view, Py_ssize_t size) {
    const char *f = view->format;
    if (!f || view->itemsize != size) return 0;
    if (*f == '@' || *f == '=' || *f == '<') f++;
    if (f[0] == '\0' || f[1] != '\0') return 0;
    if (size == 1) return f[0] == '?' || f[0] == 'b' || f[0] == 'B';
    return f[0] == 'i' || f[0] == 'l' || f[0] == 'q';
}

/* Grow `*p` (items of `size` bytes, `*cap` of them) to hold at least `need`, doubling;
 * -1 with MemoryError set when that fails. */
static inline int kernel_grow(void **p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 0;
    size_t cap2 = *cap ? *cap : 64;
    while (cap2 < need) cap2 *= 2;
    void *q = PyMem_Realloc(*p, cap2 * size);
    if (!q) {
        PyErr_NoMemory();
        return -1;
    }
    *p = q;
    *cap = cap2;
    return 0;
}

/* The clock `time.monotonic()` reads on Linux, in seconds, so a deadline the Python
 * computed from it means the same instant here. */
static inline double kernel_monotonic_s(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

/* Whether `deadline` (a `time.monotonic()` value, +inf for none) has passed. */
static inline int kernel_past(double deadline) {
    return !isinf(deadline) && kernel_monotonic_s() > deadline;
}

#endif
