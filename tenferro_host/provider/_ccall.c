/* The compiled planned call: an op handle's key, guard and replay in C.
 *
 * `call(plans, tensors, attrs)` is what an op handle does per call once its key is planned
 * (tenferro_host/provider/_plan_table.py is the reference, in Python): it builds the call's key,
 * finds its state in the handle's plan table and, for a replay whose backend gave it a compiled
 * core, runs the core — the guard, the outputs' storages and tensors, the slot writes and the
 * launches — without a Python frame. Anything a core does not cover it answers FALLBACK, and the
 * replay's own Python `__call__` runs; anything not planned comes back as `Unplanned((key,
 * state))` for the handle's Python path. `find` is the key and lookup alone, for the tests that
 * compare it with the Python one.
 *
 * Objects are made as their Python classes would make them: a Tensor's or a storage's slots are
 * written through their member descriptors' offsets (read once, from the classes themselves), so
 * nothing here knows a layout the Python code does not declare. A core holds strong references
 * to everything it reads; a call holds the plan and its core for the call's length.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>
#include <stdint.h>
#include <structmember.h>

#ifndef SOURCE_HASH
#define SOURCE_HASH "unknown"
#endif

#define SLOT(o, off) (*(PyObject **)((char *)(o) + (off)))

/* the XLA FFI entry (_ccall_xla.c, compiled into this module) */
PyObject *tfh_xla_configure(PyObject *module, PyObject *args);
PyObject *tfh_xla_handler(PyObject *module, PyObject *args);

/* ---- what configure() hands over, once ---------------------------------------------------- */
static PyTypeObject *tensor_type, *storage_type, *replay_type;
static PyObject *learning_type, *blocked, *replay_miss, *fallback, *unplanned_type;
static PyObject *unhashable, *exact_kind_fn, *thread_token_fn;
static Py_ssize_t t_storage, t_dtype, t_shape, t_strides, t_offset, t_compact;
static Py_ssize_t s_runtime, s_domain, s_nbytes, s_kind, s_read_only, r_core;
static PyObject *str_hot, *str_capture, *str_host, *str_observes, *str_threads, *str_hex;
static PyObject *str_closed, *str_debug_sync, *str_refuse_wait, *str_pop, *str_append;
static PyObject *str_hits, *str_block, *str_owned, *str_dtype, *str_view, *str_allocate;
static PyObject *str_poison, *str_deferred;
static PyObject *zero, *one, *minus_one;

static int slot_offset(PyObject *type, const char *name, Py_ssize_t *out) {
    PyObject *d = PyObject_GetAttrString(type, name);
    if (d == NULL) return -1;
    if (!Py_IS_TYPE(d, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "%R.%s is not a __slots__ member", type, name);
        Py_DECREF(d);
        return -1;
    }
    *out = ((PyMemberDescrObject *)d)->d_member->offset;
    Py_DECREF(d);
    return 0;
}

static inline void set_slot(PyObject *o, Py_ssize_t off, PyObject *v) {
    PyObject *old = SLOT(o, off);
    SLOT(o, off) = Py_NewRef(v);
    Py_XDECREF(old);
}

/* Instance attribute `name` of `o`, read from its instance dict without the type's lookup: a
 * new reference, or NULL without an exception where the dict has none (or `o` has no dict). */
static PyObject *instance_attr(PyObject *o, PyObject *name) {
    PyObject *dict = PyObject_GenericGetDict(o, NULL), *v = NULL;
    if (dict != NULL) {
        v = PyDict_GetItemWithError(dict, name);
        Py_XINCREF(v);
        Py_DECREF(dict);
    }
    PyErr_Clear(); /* no instance dict, or a lookup error: the caller's own path */
    return v;
}

/* Attribute `name` of `o` (a new reference; NULL with an exception set): the instance's own
 * where it has it (the guards read plain instance attributes per call), else the full lookup. */
static PyObject *attr_of(PyObject *o, PyObject *name) {
    PyObject *v = instance_attr(o, name);
    return v != NULL ? v : PyObject_GetAttr(o, name);
}

/* Whether attribute `name` of `o` is true: 1, 0, or -1 with an exception set. */
static int attr_true(PyObject *o, PyObject *name) {
    PyObject *v = attr_of(o, name);
    int truth;
    if (v == NULL) return -1;
    truth = PyObject_IsTrue(v);
    Py_DECREF(v);
    return truth;
}

/* A new instance of a __slots__ class, its __init__ not run (the caller writes every slot). */
static inline PyObject *bare(PyTypeObject *type) { return type->tp_alloc(type, 0); }

/* A fresh storage of `type` the runtime owns (Storage's slots written; the subclass's are the
 * caller's). */
static PyObject *owned_storage(PyObject *type, PyObject *runtime, PyObject *domain,
                               PyObject *nbytes) {
    PyObject *storage = bare((PyTypeObject *)type);
    if (storage == NULL) return NULL;
    set_slot(storage, s_runtime, runtime);
    set_slot(storage, s_domain, domain);
    set_slot(storage, s_nbytes, nbytes);
    set_slot(storage, s_kind, str_owned);
    set_slot(storage, s_read_only, Py_False);
    return storage;
}

static PyObject *new_tensor(PyObject *storage, PyObject *layout) {
    /* layout: (dtype, shape, strides) */
    PyObject *t = bare(tensor_type);
    if (t == NULL) return NULL;
    set_slot(t, t_storage, storage);
    set_slot(t, t_dtype, PyTuple_GET_ITEM(layout, 0));
    set_slot(t, t_shape, PyTuple_GET_ITEM(layout, 1));
    set_slot(t, t_strides, PyTuple_GET_ITEM(layout, 2));
    set_slot(t, t_offset, zero);
    set_slot(t, t_compact, Py_True);
    return t;
}

/* ---- the key (PlanTable.find) ------------------------------------------------------------ */

static PyObject *storage_runtime(PyObject *storage) {
    if (PyObject_TypeCheck(storage, storage_type)) {
        PyObject *rt = SLOT(storage, s_runtime);
        if (rt != NULL) return Py_NewRef(rt);
    }
    return PyObject_GetAttrString(storage, "runtime");
}

/* The call key of `tensors` and `attrs` (a new reference), Py_None when an input is not a
 * Tensor; NULL with an exception set. */
static PyObject *make_key(PyObject *tensors, PyObject *attrs) {
    Py_ssize_t n = PyTuple_GET_SIZE(tensors), nattrs = 0, at = 0, pos = 0;
    PyObject *storages[8], **st = storages, *key = NULL, *name, *value;
    int shared = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyTuple_GET_ITEM(tensors, i);
        if (Py_TYPE(t) != tensor_type) Py_RETURN_NONE;
        if (SLOT(t, t_storage) == NULL) {
            PyErr_SetString(PyExc_AttributeError, "'Tensor' object has no attribute 'storage'");
            return NULL;
        }
    }
    if (n > 8 && (st = PyMem_Malloc(n * sizeof(PyObject *))) == NULL) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) st[i] = SLOT(PyTuple_GET_ITEM(tensors, i), t_storage);
    for (Py_ssize_t i = 1; i < n && !shared; i++)
        for (Py_ssize_t j = 0; j < i; j++)
            if (st[i] == st[j]) {
                shared = 1;
                break;
            }
    if (attrs != NULL && attrs != Py_None) nattrs = PyDict_GET_SIZE(attrs);
    key = PyTuple_New(5 * n + shared + 3 * nattrs);
    if (key == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyTuple_GET_ITEM(tensors, i), *rt;
        PyObject *fields[4] = {SLOT(t, t_dtype), SLOT(t, t_shape), SLOT(t, t_strides),
                               SLOT(t, t_offset)};
        for (int k = 0; k < 4; k++) {
            if (fields[k] == NULL) {
                PyErr_SetString(PyExc_AttributeError, "a Tensor's layout is not set");
                Py_CLEAR(key);
                goto done;
            }
            PyTuple_SET_ITEM(key, at++, Py_NewRef(fields[k]));
        }
        if ((rt = storage_runtime(st[i])) == NULL) {
            Py_CLEAR(key);
            goto done;
        }
        PyTuple_SET_ITEM(key, at++, rt);
    }
    if (shared) {
        PyObject *sharing = PyTuple_New(n);
        if (sharing == NULL) {
            Py_CLEAR(key);
            goto done;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_ssize_t first = 0;
            while (st[first] != st[i]) first++;
            PyTuple_SET_ITEM(sharing, i, PyLong_FromSsize_t(first));
        }
        PyTuple_SET_ITEM(key, at++, sharing);
    }
    while (nattrs && PyDict_Next(attrs, &pos, &name, &value)) {
        PyObject *kind;
        if (PyFloat_CheckExact(value))
            kind = PyObject_CallMethodNoArgs(value, str_hex);
        else if (PyTuple_CheckExact(value))
            kind = PyObject_CallOneArg(exact_kind_fn, value);
        else
            kind = Py_NewRef((PyObject *)Py_TYPE(value));
        if (kind == NULL) {
            Py_CLEAR(key);
            goto done;
        }
        PyTuple_SET_ITEM(key, at++, Py_NewRef(name));
        PyTuple_SET_ITEM(key, at++, Py_NewRef(value));
        PyTuple_SET_ITEM(key, at++, kind);
    }
done:
    if (st != storages) PyMem_Free(st);
    return key;
}

/* Whether the runtime can neither replay nor record now (PlanTable.find's BLOCKED): 1, 0, or -1
 * with an exception set. */
static int is_blocked(PyObject *runtime) {
    PyObject *capture = attr_of(runtime, str_capture), *host, *opened;
    int blocked_now;
    if (capture == NULL) return -1;
    blocked_now = capture != Py_None;
    Py_DECREF(capture);
    if (blocked_now) return 1;
    if ((host = attr_of(runtime, str_host)) == NULL) return -1;
    blocked_now = attr_true(host, str_observes);
    Py_DECREF(host);
    if (blocked_now) return blocked_now;
    if ((opened = attr_of(runtime, str_threads)) == NULL) return -1;
    blocked_now = PyObject_IsTrue(opened);
    if (blocked_now == 1) {
        PyObject *token = PyObject_CallNoArgs(thread_token_fn);
        blocked_now = token == NULL ? -1 : PySequence_Contains(opened, token);
        Py_XDECREF(token);
    }
    Py_DECREF(opened);
    return blocked_now;
}

/* The key and its state (new references; *key is Py_None and *state Py_None for a call that is
 * never keyed); -1 with an exception set. */
static int find_state(PyObject *plans, PyObject *tensors, PyObject *attrs, PyObject **key,
                      PyObject **state) {
    PyObject *hot, *plan;
    int b;
    *state = NULL;
    if ((*key = make_key(tensors, attrs)) == NULL) return -1;
    if (*key == Py_None) {
        *state = Py_NewRef(Py_None);
        return 0;
    }
    if ((b = is_blocked(PyTuple_GET_ITEM(*key, 4))) != 0) {
        if (b < 0) {
            Py_CLEAR(*key);
            return -1;
        }
        *state = Py_NewRef(blocked);
        return 0;
    }
    if ((hot = PyObject_GetAttr(plans, str_hot)) == NULL) goto fail;
    if (PyTuple_Check(hot) && PyTuple_GET_SIZE(hot) == 2) {
        int same = PyObject_RichCompareBool(*key, PyTuple_GET_ITEM(hot, 0), Py_EQ);
        if (same == 1) {
            *state = Py_NewRef(PyTuple_GET_ITEM(hot, 1));
            Py_DECREF(hot);
            return 0;
        }
        if (same < 0) {  /* an attribute whose == raises: the lookup's rules decide */
            if (!PyErr_ExceptionMatches(PyExc_Exception)) {
                Py_DECREF(hot);
                goto fail;
            }
            PyErr_Clear();
        }
    }
    Py_DECREF(hot);
    plan = PyDict_GetItemWithError(plans, *key);
    if (plan == NULL) {
        if (!PyErr_Occurred()) {
            *state = Py_NewRef(Py_None);
            return 0;
        }
        if (!PyErr_ExceptionMatches(PyExc_TypeError)) goto fail;
        PyErr_Clear();  /* an unhashable attribute: never planned */
        *state = Py_NewRef(unhashable);
        return 0;
    }
    *state = Py_NewRef(plan);
    if ((PyObject *)Py_TYPE(plan) != learning_type) {
        PyObject *pair = PyTuple_Pack(2, *key, plan);
        if (pair == NULL || PyObject_SetAttr(plans, str_hot, pair) < 0) {
            Py_XDECREF(pair);
            Py_CLEAR(*state);
            goto fail;
        }
        Py_DECREF(pair);
    }
    return 0;
fail:
    Py_CLEAR(*key);
    return -1;
}

static PyObject *find(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *key, *state, *out;
    if (nargs != 3 || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "find(plans, tensors: tuple, attrs)");
        return NULL;
    }
    if (find_state(args[0], args[1], args[2], &key, &state) < 0) return NULL;
    out = PyTuple_Pack(2, key, state);
    Py_DECREF(key);
    Py_DECREF(state);
    return out;
}

/* ---- cores ------------------------------------------------------------------------------- */

/* Whether every input a core reads (`used`: indices) is a Tensor on a storage of `type`: what
 * the call's key guarantees, and what a core called on its own (or by a jit session, whose
 * arguments include scalars) checks before it reads a slot. */
static int inputs_fit(PyObject *tensors, PyObject *used, PyObject *type) {
    Py_ssize_t n = PyTuple_GET_SIZE(tensors);
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(used); k++) {
        Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(used, k));
        PyObject *t, *storage;
        if (i < 0 || i >= n) return 0;
        t = PyTuple_GET_ITEM(tensors, i);
        if (Py_TYPE(t) != tensor_type || (storage = SLOT(t, t_storage)) == NULL ||
            !PyObject_TypeCheck(storage, (PyTypeObject *)type))
            return 0;
    }
    return 1;
}

static int read_only(PyObject *tensors, PyObject *exclusive) {
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(exclusive); k++) {
        Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(exclusive, k));
        PyObject *storage = SLOT(PyTuple_GET_ITEM(tensors, i), t_storage);
        PyObject *ro = SLOT(storage, s_read_only);
        int truth = ro == NULL ? 1 : PyObject_IsTrue(ro);
        if (truth) return truth;
    }
    return 0;
}

/* A framework's output allocator while it is the runtime's (an instance's `_allocate`, which
 * OpReplay.allocate asks first): a new reference, or NULL (no exception) when there is none. */
static PyObject *framework_allocator(PyObject *runtime) {
    return instance_attr(runtime, str_allocate);
}

/* An output's storage from the framework's allocator: seam(nbytes, dtype). */
static PyObject *from_seam(PyObject *seam, PyObject *nbytes, PyObject *layout) {
    PyObject *args[2] = {nbytes, PyTuple_GET_ITEM(layout, 0)};
    return PyObject_Vectorcall(seam, args, 2, NULL);
}

/* A call's result from its outputs: the one tensor, or a tuple of several (or none). */
static PyObject *outputs_tuple(PyObject *outs, int several) {
    if (several) return PyList_AsTuple(outs);
    return Py_NewRef(PyList_GET_ITEM(outs, 0));
}

/* ---- the CUDA core --------------------------------------------------------------------- */

static PyObject *core_tp_call(PyObject *self, PyObject *args, PyObject *kwds);

typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                         unsigned, void *, void **, void **);
typedef int (*current_fn)(void **);
typedef int (*set_current_fn)(void *);

typedef struct {
    int param, which, index;
    long long delta;
} CSlot;

typedef struct {
    void *func, *stream;
    unsigned grid[3], block[3], shared;
    Py_ssize_t nparams, nslots;
    uint64_t *words;
    void **pointers;
    CSlot *slots;
} CLaunch;

typedef struct {
    PyObject_HEAD
    PyObject *runtime, *retirement, *entries, *deferred, *blocks, *poisoned, *outputs;
    PyObject *exclusive, *fails, *storage_type, *domain, *used;
    Py_ssize_t c_ptr, c_block, c_release, nlaunches;
    Py_ssize_t inputs_read, outputs_written; /* 1 + the highest input / output index a slot names */
    unsigned long thread;
    void *context;
    launch_fn launch;
    current_fn current;
    set_current_fn set_current;
    int several;
    CLaunch *launches;
} DriverLaunchCore;

static int cuda_traverse(DriverLaunchCore *self, visitproc visit, void *arg) {
    Py_VISIT(self->runtime);
    Py_VISIT(self->retirement);
    Py_VISIT(self->entries);
    Py_VISIT(self->deferred);
    Py_VISIT(self->blocks);
    Py_VISIT(self->poisoned);
    Py_VISIT(self->outputs);
    Py_VISIT(self->exclusive);
    Py_VISIT(self->fails);
    Py_VISIT(self->storage_type);
    Py_VISIT(self->domain);
    return 0;
}

static int cuda_clear(DriverLaunchCore *self) {
    Py_CLEAR(self->runtime);
    Py_CLEAR(self->retirement);
    Py_CLEAR(self->entries);
    Py_CLEAR(self->deferred);
    Py_CLEAR(self->blocks);
    Py_CLEAR(self->poisoned);
    Py_CLEAR(self->outputs);
    Py_CLEAR(self->exclusive);
    Py_CLEAR(self->fails);
    Py_CLEAR(self->storage_type);
    Py_CLEAR(self->domain);
    Py_CLEAR(self->used);
    return 0;
}

static void free_launches(CLaunch *launches, Py_ssize_t n) {
    if (launches == NULL) return;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyMem_Free(launches[i].words);
        PyMem_Free(launches[i].pointers);
        PyMem_Free(launches[i].slots);
    }
    PyMem_Free(launches);
}

static void cuda_dealloc(DriverLaunchCore *self) {
    PyObject_GC_UnTrack(self);
    cuda_clear(self);
    free_launches(self->launches, self->nlaunches);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static void *as_pointer(PyObject *o) {
    return o == Py_None ? NULL : PyLong_AsVoidPtr(o);
}

/* DriverLaunchCore(runtime, storage_type, context, current, set_current, launch, thread, outputs,
 *          exclusive, used, fails, launches): current and set_current cuCtxGetCurrent's and
 *          cuCtxSetCurrent's entry points; launches are (function, grid, block, shared, stream, words: bytes,
 *          slots: ((param, which, index, delta), ...)); outputs (allocator, nbytes, size class,
 *          (dtype, shape, strides)); fails one callable per launch, err -> the exception. */
static PyObject *cuda_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *runtime, *stype, *context, *current, *set_current, *launch, *thread, *outputs;
    PyObject *exclusive, *used, *fails, *launches;
    DriverLaunchCore *self;
    if (!PyArg_ParseTuple(args, "OO!OOOOOO!O!O!O!O!:DriverLaunchCore", &runtime, &PyType_Type,
                          &stype, &context, &current, &set_current, &launch, &thread,
                          &PyTuple_Type, &outputs,
                          &PyTuple_Type, &exclusive, &PyTuple_Type, &used, &PyTuple_Type, &fails,
                          &PyTuple_Type, &launches))
        return NULL;
    if (PyTuple_GET_SIZE(fails) != PyTuple_GET_SIZE(launches)) {
        PyErr_SetString(PyExc_ValueError, "one failure callable per launch");
        return NULL;
    }
    self = (DriverLaunchCore *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->runtime = Py_NewRef(runtime);
    self->storage_type = Py_NewRef(stype);
    self->outputs = Py_NewRef(outputs);
    self->exclusive = Py_NewRef(exclusive);
    self->used = Py_NewRef(used);
    self->fails = Py_NewRef(fails);
    self->several = PyTuple_GET_SIZE(outputs) != 1;
    self->context = as_pointer(context);
    self->current = (current_fn)as_pointer(current);
    self->set_current = (set_current_fn)as_pointer(set_current);
    self->launch = (launch_fn)as_pointer(launch);
    self->thread = PyLong_AsUnsignedLong(thread);
    if (PyErr_Occurred()) goto fail;
    if (self->current == NULL || self->set_current == NULL) {
        PyErr_SetString(PyExc_ValueError,
                        "DriverLaunchCore needs cuCtxGetCurrent's and cuCtxSetCurrent's addresses");
        goto fail;
    }
    if ((self->retirement = PyObject_GetAttrString(runtime, "retirement")) == NULL) goto fail;
    if ((self->entries = PyObject_GetAttrString(self->retirement, "_entries")) == NULL) goto fail;
    if ((self->deferred = PyObject_GetAttrString(runtime, "deferred")) == NULL) goto fail;
    if ((self->blocks = PyObject_GetAttrString(runtime, "blocks")) == NULL) goto fail;
    if ((self->domain = PyObject_GetAttrString(runtime, "domain")) == NULL) goto fail;
    {
        PyObject *driver = PyImport_ImportModule("tenferro_host_cuda._driver");
        if (driver == NULL) goto fail;
        self->poisoned = PyObject_GetAttrString(driver, "POISONED");
        Py_DECREF(driver);
        if (self->poisoned == NULL || !PyDict_Check(self->poisoned)) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "POISONED is not a dict");
            goto fail;
        }
    }
    if (slot_offset(stype, "ptr", &self->c_ptr) < 0 ||
        slot_offset(stype, "block", &self->c_block) < 0 ||
        slot_offset(stype, "release", &self->c_release) < 0)
        goto fail;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(outputs); j++) {
        PyObject *o = PyTuple_GET_ITEM(outputs, j);
        if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) != 4 || !PyTuple_Check(PyTuple_GET_ITEM(o, 3)) ||
            PyTuple_GET_SIZE(PyTuple_GET_ITEM(o, 3)) != 3) {
            PyErr_SetString(PyExc_TypeError,
                            "an output is (allocator, nbytes, size class, (dtype, shape, strides))");
            goto fail;
        }
    }
    self->nlaunches = PyTuple_GET_SIZE(launches);
    self->launches = PyMem_Calloc(self->nlaunches ? self->nlaunches : 1, sizeof(CLaunch));
    if (self->launches == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < self->nlaunches; i++) {
        CLaunch *l = &self->launches[i];
        PyObject *func, *stream, *words, *slots;
        char *raw;
        Py_ssize_t nraw;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(launches, i), "O(III)(III)IOSO!", &func,
                              &l->grid[0], &l->grid[1], &l->grid[2], &l->block[0], &l->block[1],
                              &l->block[2], &l->shared, &stream, &words, &PyTuple_Type, &slots))
            goto fail;
        l->func = as_pointer(func);
        l->stream = as_pointer(stream);
        if (PyErr_Occurred()) goto fail;
        if (PyBytes_AsStringAndSize(words, &raw, &nraw) < 0) goto fail;
        l->nparams = nraw / 8;
        l->words = PyMem_Calloc(l->nparams ? l->nparams : 1, 8);
        l->pointers = PyMem_Calloc(l->nparams ? l->nparams : 1, sizeof(void *));
        l->nslots = PyTuple_GET_SIZE(slots);
        l->slots = PyMem_Calloc(l->nslots ? l->nslots : 1, sizeof(CSlot));
        if (l->words == NULL || l->pointers == NULL || l->slots == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        memcpy(l->words, raw, 8 * l->nparams);
        for (Py_ssize_t p = 0; p < l->nparams; p++) l->pointers[p] = &l->words[p];
        for (Py_ssize_t s = 0; s < l->nslots; s++) {
            CSlot *c = &l->slots[s];
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(slots, s), "iiiL", &c->param, &c->which,
                                  &c->index, &c->delta))
                goto fail;
            if (c->param < 0 || c->param >= l->nparams || c->index < 0) {
                PyErr_SetString(PyExc_ValueError,
                                "a slot names a parameter outside the block or a negative index");
                goto fail;
            }
            if (c->which == 0 && c->index >= self->inputs_read) self->inputs_read = c->index + 1;
            if (c->which != 0 && c->index >= self->outputs_written)
                self->outputs_written = c->index + 1;
        }
    }
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

/* A reused block: the newest queued release when it is the only one, of the size class, and
 * nothing is pending in the retirement queue (allocate_block's reuse when no drain and no poll
 * has anything to do); NULL without an exception when not, and the release is put back. */
static PyObject *reused_block(DriverLaunchCore *self, PyObject *output) {
    PyObject *size = PyTuple_GET_ITEM(output, 2), *release, *block, *storage, *hits, *more;
    int match;
    if (PyObject_Length(self->deferred) != 1 || PyObject_Length(self->entries) != 0) {
        PyErr_Clear();
        return NULL;
    }
    if (!PyObject_IsTrue(size)) return NULL;
    release = PyObject_CallMethodNoArgs(self->deferred, str_pop);
    if (release == NULL) {  /* another thread drained it meanwhile */
        PyErr_Clear();
        return NULL;
    }
    match = PyTuple_CheckExact(release) && PyTuple_GET_SIZE(release) == 2 &&
            PyUnicode_Check(PyTuple_GET_ITEM(release, 0)) &&
            PyUnicode_Compare(PyTuple_GET_ITEM(release, 0), str_block) == 0 &&
            PyTuple_Check(block = PyTuple_GET_ITEM(release, 1)) && PyTuple_GET_SIZE(block) == 2 &&
            PyObject_RichCompareBool(PyTuple_GET_ITEM(block, 1), size, Py_EQ) == 1;
    if (!match) {
        PyErr_Clear();
        PyObject *r = PyObject_CallMethodOneArg(self->deferred, str_append, release);
        Py_DECREF(release);
        Py_XDECREF(r);
        return NULL;
    }
    if ((hits = PyObject_GetAttr(self->blocks, str_hits)) == NULL) goto fail;
    more = PyNumber_Add(hits, one);
    Py_DECREF(hits);
    if (more == NULL || PyObject_SetAttr(self->blocks, str_hits, more) < 0) {
        Py_XDECREF(more);
        goto fail;
    }
    Py_DECREF(more);
    storage = owned_storage(self->storage_type, self->runtime, self->domain,
                            PyTuple_GET_ITEM(output, 1));
    if (storage == NULL) goto fail;
    set_slot(storage, self->c_release, release);
    set_slot(storage, self->c_ptr, PyTuple_GET_ITEM(block, 0));
    set_slot(storage, self->c_block, size);
    Py_DECREF(release);
    return storage;
fail:
    Py_DECREF(release);
    return NULL;
}

/* A launch's failure raised: fail(err) makes the exception (the launch's own message). */
static void raise_failure(PyObject *fail, int err) {
    PyObject *code = PyLong_FromLong(err), *exc;
    if (code == NULL) return;
    exc = PyObject_CallOneArg(fail, code);
    Py_DECREF(code);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
}

/* The guard of a CUDA core's run: 1 when it refuses (closed, poisoned, synchronizing, a capture
 * holding the queue, another thread: the full path), 0 when it lets the call run, -1 with an
 * exception set. */
static int cuda_refuses(DriverLaunchCore *self) {
    PyObject *rt = self->runtime, *v;
    int truth;
    if (PyDict_GET_SIZE(self->poisoned) || PyThread_get_thread_ident() != self->thread) return 1;
    if ((truth = attr_true(rt, str_closed)) == 0) truth = attr_true(rt, str_debug_sync);
    if (truth) return truth;
    if ((v = attr_of(self->retirement, str_refuse_wait)) == NULL) return -1;
    truth = v != Py_None;
    Py_DECREF(v);
    return truth;
}

/* The core's context made current for its launches where the thread has none: 0 when it is
 * current already, 1 when the thread had no context and the core made its own current
 * (end_context restores none after the launches: a thread's context is as it was, as around
 * a session), -1 when another context is current or the driver failed (the Python path
 * switches, restores and raises). */
static int begin_context(DriverLaunchCore *self) {
    void *ctx = NULL;
    if (self->current(&ctx) != 0) return -1;
    if (ctx == self->context) return 0;
    if (ctx != NULL || self->set_current(self->context) != 0) return -1;
    return 1;
}

/* No context current again where begin_context made the core's current (entered 1): 0, or -1
 * with the runtime's typed error set (an error raised already stays the one raised). */
static int end_context(DriverLaunchCore *self, int entered) {
    PyObject *exc;
    int err;
    if (entered != 1 || (err = self->set_current(NULL)) == 0) return 0;
    if (PyErr_Occurred()) return -1;
    exc = PyObject_CallMethod(self->runtime, "fail", "is", err, "cuCtxSetCurrent (restore)");
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return -1;
}

/* A CUDA core's run up to its launches: the guard, the context (begin_context, *entered) and
 * the outputs. 1 with *outs (a new list), 0 with *answer (REPLAY_MISS or FALLBACK, a new
 * reference), -1 with an exception set; the caller ends the context after 1 only. */
static int cuda_begin(DriverLaunchCore *self, PyObject *tensors, PyObject **answer,
                      PyObject **outs, int *entered) {
    PyObject *rt = self->runtime, *seam;
    Py_ssize_t nout = PyTuple_GET_SIZE(self->outputs);
    int truth;
    *answer = replay_miss;
    if ((truth = cuda_refuses(self)) != 0) {
        if (truth < 0) return -1;
        goto no;
    }
    /* what the Python replay does itself: an input it cannot read here, another context */
    *answer = fallback;
    if (!inputs_fit(tensors, self->used, self->storage_type)) goto no;
    if ((truth = read_only(tensors, self->exclusive)) != 0) {
        *answer = replay_miss;
        if (truth < 0) return -1;
        goto no;
    }
    if ((*entered = begin_context(self)) < 0) goto no;
    seam = framework_allocator(rt);
    if ((*outs = PyList_New(nout)) == NULL) goto failed;
    for (Py_ssize_t j = 0; j < nout; j++) {
        PyObject *output = PyTuple_GET_ITEM(self->outputs, j), *storage, *t;
        if (seam != NULL)
            storage = from_seam(seam, PyTuple_GET_ITEM(output, 1), PyTuple_GET_ITEM(output, 3));
        else if ((storage = reused_block(self, output)) == NULL && !PyErr_Occurred())
            storage = PyObject_CallNoArgs(PyTuple_GET_ITEM(output, 0));
        t = storage == NULL ? NULL : new_tensor(storage, PyTuple_GET_ITEM(output, 3));
        Py_XDECREF(storage);
        if (t == NULL) goto failed;
        PyList_SET_ITEM(*outs, j, t);
    }
    Py_XDECREF(seam);
    return 1;
failed: /* (the allocation's error is the one raised) */
    Py_XDECREF(seam);
    Py_CLEAR(*outs);
    end_context(self, *entered);
    return -1;
no:
    Py_INCREF(*answer);
    return 0;
}

/* The core's launches, each slot written with its buffer's device address: the input's (from
 * `ins`) or the output's (from `outs`), each a sequence of tensors or, with `addresses`, of
 * addresses (ints). 0, or -1 with the exception set (a launch's failure raised as its own). */
static int cuda_launch(DriverLaunchCore *self, PyObject *ins, PyObject *outs, int addresses) {
    for (Py_ssize_t i = 0; i < self->nlaunches; i++) {
        CLaunch *l = &self->launches[i];
        int err;
        for (Py_ssize_t s = 0; s < l->nslots; s++) {
            CSlot *c = &l->slots[s];
            PyObject *t = PySequence_Fast_GET_ITEM(c->which == 0 ? ins : outs, c->index);
            unsigned long long ptr = PyLong_AsUnsignedLongLong(
                addresses ? t : SLOT(SLOT(t, t_storage), self->c_ptr));
            if (ptr == (unsigned long long)-1 && PyErr_Occurred()) return -1;
            l->words[c->param] = ptr + (unsigned long long)c->delta;
        }
        Py_BEGIN_ALLOW_THREADS
        err = self->launch(l->func, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1],
                           l->block[2], l->shared, l->stream, l->nparams ? l->pointers : NULL,
                           NULL);
        Py_END_ALLOW_THREADS
        if (err) {
            raise_failure(PyTuple_GET_ITEM(self->fails, i), err);
            return -1;
        }
    }
    return 0;
}

static PyObject *cuda_call(DriverLaunchCore *self, PyObject *tensors) {
    PyObject *outs, *answer, *result = NULL;
    int entered = 0, begun = cuda_begin(self, tensors, &answer, &outs, &entered);
    if (begun <= 0) return begun < 0 ? NULL : answer;
    if (cuda_launch(self, tensors, outs, 0) == 0) result = outputs_tuple(outs, self->several);
    Py_DECREF(outs);
    if (end_context(self, entered) < 0) Py_CLEAR(result);
    return result;
}

/* core.launch_pointers(inputs, outputs): the launches on buffers at device addresses (tuples of
 * ints, the outputs in the replay's layouts: a framework's), after the same guard and context
 * check as a call; True when launched, False when the guard refuses (the caller's own path). */
static PyObject *cuda_launch_pointers(DriverLaunchCore *self, PyObject *const *args,
                                      Py_ssize_t nargs) {
    int truth, entered, launched;
    if (nargs != 2 || !PyTuple_Check(args[0]) || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "launch_pointers(inputs: tuple, outputs: tuple)");
        return NULL;
    }
    if (PyTuple_GET_SIZE(args[0]) < self->inputs_read ||
        PyTuple_GET_SIZE(args[1]) < self->outputs_written) {
        PyErr_Format(PyExc_ValueError,
                     "launch_pointers: the launches read %zd inputs and write %zd outputs, "
                     "got %zd and %zd addresses", self->inputs_read, self->outputs_written,
                     PyTuple_GET_SIZE(args[0]), PyTuple_GET_SIZE(args[1]));
        return NULL;
    }
    if ((truth = cuda_refuses(self)) != 0) return truth < 0 ? NULL : Py_NewRef(Py_False);
    if ((entered = begin_context(self)) < 0) return Py_NewRef(Py_False);
    launched = cuda_launch(self, args[0], args[1], 1);
    if (end_context(self, entered) < 0 || launched < 0) return NULL;
    return Py_NewRef(Py_True);
}

static PyMethodDef cuda_methods[] = {
    {"launch_pointers", (PyCFunction)(void (*)(void))cuda_launch_pointers, METH_FASTCALL,
     "launch_pointers(inputs, outputs) -> bool: the launches on buffers at device addresses."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject DriverLaunchCore_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tenferro_host.provider._ccall.DriverLaunchCore",
    .tp_basicsize = sizeof(DriverLaunchCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A CUDA op replay's guard, outputs, slot writes and launches, compiled.",
    .tp_new = cuda_new,
    .tp_methods = cuda_methods,
    .tp_dealloc = (destructor)cuda_dealloc,
    .tp_traverse = (traverseproc)cuda_traverse,
    .tp_clear = (inquiry)cuda_clear,
    .tp_call = core_tp_call,
};

/* ---- the native CUDA graph's replay ----------------------------------------------------- */

typedef int (*graph_launch_fn)(void *, void *);
typedef int (*set_params_fn)(void *, void *, void *);

/* A kernel node's parameter that points into a slot's or an output's memory: the node, the
 * word of its parameter block that holds the address, and the address's offset from the base. */
typedef struct {
    Py_ssize_t node;
    uint64_t *word;
    long long delta;
} CSite;

/* A captured graph's replay through its CUDA graph executable, compiled: the slots' checks
 * (CapturedGraph._bind's, for a graph whose borrowed tensors did not overlap), the CUDA core's
 * guard, context and outputs, the nodes whose pointers moved rewritten
 * (cuGraphExecKernelNodeSetParams, as NativeLauncher._update does), and one cuGraphLaunch;
 * new values of the declared scalars go to the launcher's Python rewrite with the outputs
 * made. The launcher is held weakly: it owns this core, and a cycle would keep its graph and
 * arena until a collection. */
typedef struct {
    DriverLaunchCore base; /* no launches of its own */
    PyObject *launcher, *fits, *constants, *bases, *scalars, *lock;
    Py_ssize_t nslots, nbases, nnodes, *itemsizes, *site_starts;
    void *exec, *stream, **node_handles, **node_params;
    unsigned long long *now; /* this replay's bases */
    char *dirty;             /* per node: a parameter of it was rewritten */
    CSite *sites;
    graph_launch_fn graph_launch;
    set_params_fn set_params;
} GraphLaunchCore;

static PyObject *str_acquire, *str_release, *str_scalars, *str_moved, *str_failed, *str_what;
static PyObject *str_update_what;

static int graph_traverse(GraphLaunchCore *self, visitproc visit, void *arg) {
    Py_VISIT(self->launcher);
    Py_VISIT(self->fits);
    Py_VISIT(self->constants);
    Py_VISIT(self->bases);
    Py_VISIT(self->scalars);
    Py_VISIT(self->lock);
    return cuda_traverse(&self->base, visit, arg);
}

static int graph_clear(GraphLaunchCore *self) {
    Py_CLEAR(self->launcher);
    Py_CLEAR(self->fits);
    Py_CLEAR(self->constants);
    Py_CLEAR(self->bases);
    Py_CLEAR(self->scalars);
    Py_CLEAR(self->lock);
    return cuda_clear(&self->base);
}

static void graph_dealloc(GraphLaunchCore *self) {
    PyObject_GC_UnTrack(self);
    graph_clear(self);
    PyMem_Free(self->itemsizes);
    PyMem_Free(self->site_starts);
    PyMem_Free(self->node_handles);
    PyMem_Free(self->node_params);
    PyMem_Free(self->now);
    PyMem_Free(self->dirty);
    PyMem_Free(self->sites);
    free_launches(self->base.launches, self->base.nlaunches);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The nodes ((handle, address of its CUDA_KERNEL_NODE_PARAMS), ...) and, per base, the sites
 * ((node index, address of the word, delta), ...) read into the core's arrays: 0, or -1 with
 * an exception set. */
static int read_nodes(GraphLaunchCore *self, PyObject *nodes, PyObject *sites) {
    Py_ssize_t total = 0, k = 0;
    self->nnodes = PyTuple_GET_SIZE(nodes);
    if (PyTuple_GET_SIZE(sites) != self->nbases) {
        PyErr_SetString(PyExc_ValueError, "one tuple of sites per base");
        return -1;
    }
    for (Py_ssize_t i = 0; i < self->nbases; i++) {
        if (!PyTuple_Check(PyTuple_GET_ITEM(sites, i))) {
            PyErr_SetString(PyExc_TypeError, "a base's sites are a tuple");
            return -1;
        }
        total += PyTuple_GET_SIZE(PyTuple_GET_ITEM(sites, i));
    }
    self->node_handles = PyMem_Calloc(self->nnodes ? self->nnodes : 1, sizeof(void *));
    self->node_params = PyMem_Calloc(self->nnodes ? self->nnodes : 1, sizeof(void *));
    self->dirty = PyMem_Calloc(self->nnodes ? self->nnodes : 1, 1);
    self->now = PyMem_Calloc(self->nbases ? self->nbases : 1, sizeof(unsigned long long));
    self->site_starts = PyMem_Calloc(self->nbases + 1, sizeof(Py_ssize_t));
    self->sites = PyMem_Calloc(total ? total : 1, sizeof(CSite));
    if (self->node_handles == NULL || self->node_params == NULL || self->dirty == NULL ||
        self->now == NULL || self->site_starts == NULL || self->sites == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t n = 0; n < self->nnodes; n++) {
        PyObject *handle, *params;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(nodes, n), "OO", &handle, &params)) return -1;
        self->node_handles[n] = as_pointer(handle);
        self->node_params[n] = as_pointer(params);
        if (PyErr_Occurred()) return -1;
    }
    for (Py_ssize_t i = 0; i < self->nbases; i++) {
        PyObject *of = PyTuple_GET_ITEM(sites, i);
        self->site_starts[i] = k;
        for (Py_ssize_t s = 0; s < PyTuple_GET_SIZE(of); s++, k++) {
            CSite *c = &self->sites[k];
            PyObject *word;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(of, s), "nOL", &c->node, &word, &c->delta))
                return -1;
            c->word = as_pointer(word);
            if (PyErr_Occurred()) return -1;
            if (c->node < 0 || c->node >= self->nnodes || c->word == NULL) {
                PyErr_SetString(PyExc_ValueError, "a site names no node or no word");
                return -1;
            }
        }
    }
    self->site_starts[self->nbases] = k;
    return 0;
}

/* GraphLaunchCore(launcher_ref, exec, stream, graph_launch, fits, itemsizes, constants, bases,
 *                 scalars, lock, set_params, nodes, sites, *DriverLaunchCore's fields): fits
 * one (dtype, shape, strides) per slot, itemsizes one per slot, constants the storages of the
 * graph's constants, bases the launcher's list of the addresses the executable runs with
 * (slots, then outputs; rewritten in place), scalars the declared scalars' dict a replay
 * without new values passes, lock the launcher's (one replay at a time writes and launches
 * its nodes), set_params cuGraphExecKernelNodeSetParams's entry point, nodes and sites as
 * read_nodes reads them. */
static PyObject *graph_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *ref, *exec, *stream, *launch, *fits, *sizes, *constants, *bases, *scalars, *lock;
    PyObject *set_params, *nodes, *sites, *head, *rest;
    GraphLaunchCore *self;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    int parsed;
    if ((head = PyTuple_GetSlice(args, 0, 13)) == NULL) return NULL;
    parsed = PyArg_ParseTuple(head, "OOOOO!O!O!O!O!OOO!O!:GraphLaunchCore", &ref, &exec, &stream,
                              &launch, &PyTuple_Type, &fits, &PyTuple_Type, &sizes, &PyTuple_Type,
                              &constants, &PyList_Type, &bases, &PyDict_Type, &scalars, &lock,
                              &set_params, &PyTuple_Type, &nodes, &PyTuple_Type, &sites);
    Py_DECREF(head);  /* (the tuple's items stay alive in args) */
    if (!parsed) return NULL;
    if (PyTuple_GET_SIZE(sizes) != PyTuple_GET_SIZE(fits)) {
        PyErr_SetString(PyExc_ValueError, "one itemsize per slot");
        return NULL;
    }
    if ((rest = PyTuple_GetSlice(args, 13, n)) == NULL) return NULL;
    self = (GraphLaunchCore *)cuda_new(type, rest, NULL);
    Py_DECREF(rest);
    if (self == NULL) return NULL;
    self->launcher = Py_NewRef(ref);
    self->fits = Py_NewRef(fits);
    self->constants = Py_NewRef(constants);
    self->bases = Py_NewRef(bases);
    self->scalars = Py_NewRef(scalars);
    self->lock = Py_NewRef(lock);
    self->nslots = PyTuple_GET_SIZE(fits);
    self->nbases = PyList_GET_SIZE(bases);
    self->exec = as_pointer(exec);
    self->stream = as_pointer(stream);
    self->graph_launch = (graph_launch_fn)as_pointer(launch);
    self->set_params = (set_params_fn)as_pointer(set_params);
    if (PyErr_Occurred()) goto fail;
    if (self->graph_launch == NULL || self->set_params == NULL) {
        PyErr_SetString(PyExc_ValueError,
                        "GraphLaunchCore needs cuGraphLaunch's and "
                        "cuGraphExecKernelNodeSetParams's addresses");
        goto fail;
    }
    if (self->nbases < self->nslots) {
        PyErr_SetString(PyExc_ValueError, "a base per slot and per output");
        goto fail;
    }
    self->itemsizes = PyMem_Calloc(self->nslots ? self->nslots : 1, sizeof(Py_ssize_t));
    if (self->itemsizes == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < self->nslots; i++)
        if ((self->itemsizes[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(sizes, i))) < 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "an itemsize is negative");
            goto fail;
        }
    if (read_nodes(self, nodes, sites) < 0) goto fail;
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

/* Whether the replay's tensors fit the slots as CapturedGraph._bind checks them, each on a
 * storage of its own apart from the constants' (any other aliasing: the Python check). */
static int slots_fit(GraphLaunchCore *self, PyObject *tensors) {
    PyObject *rt = self->base.runtime;
    if (PyTuple_GET_SIZE(tensors) != self->nslots) return 0;
    for (Py_ssize_t i = 0; i < self->nslots; i++) {
        PyObject *t = PyTuple_GET_ITEM(tensors, i), *fit = PyTuple_GET_ITEM(self->fits, i);
        PyObject *storage;
        if (Py_TYPE(t) != tensor_type || (storage = SLOT(t, t_storage)) == NULL ||
            !PyObject_TypeCheck(storage, storage_type) || SLOT(storage, s_runtime) != rt)
            return 0;
        for (int f = 0; f < 3; f++) {
            PyObject *mine = SLOT(t, f == 0 ? t_dtype : f == 1 ? t_shape : t_strides);
            int same = mine == PyTuple_GET_ITEM(fit, f)
                           ? 1
                           : PyObject_RichCompareBool(mine, PyTuple_GET_ITEM(fit, f), Py_EQ);
            if (same != 1) {
                PyErr_Clear();
                return 0;
            }
        }
        for (Py_ssize_t j = 0; j < i; j++)
            if (SLOT(PyTuple_GET_ITEM(tensors, j), t_storage) == storage) return 0;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(self->constants); j++)
            if (PyTuple_GET_ITEM(self->constants, j) == storage) return 0;
    }
    return 1;
}

/* Whether the runtime is free for a replay without a session: no capture, no session open. */
static int runtime_free(PyObject *rt) {
    PyObject *v = PyObject_GetAttr(rt, str_capture);
    int free_now, opened;
    if (v == NULL) return -1;
    free_now = v == Py_None;
    Py_DECREF(v);
    if (!free_now) return 0;
    opened = attr_true(rt, str_threads);
    return opened < 0 ? -1 : !opened;
}

/* The addresses this replay runs with (slots, then outputs) into self->now: 1, or 0 where one
 * cannot be read here (the launcher's Python path then). */
static int replay_bases(GraphLaunchCore *self, PyObject *tensors, PyObject *outs) {
    Py_ssize_t c_ptr = self->base.c_ptr;
    if (PyList_GET_SIZE(self->bases) != self->nbases ||
        self->nslots + PyList_GET_SIZE(outs) != self->nbases)
        return 0;
    for (Py_ssize_t i = 0; i < self->nbases; i++) {
        PyObject *t = i < self->nslots ? PyTuple_GET_ITEM(tensors, i)
                                       : PyList_GET_ITEM(outs, i - self->nslots);
        PyObject *ptr = SLOT(SLOT(t, t_storage), c_ptr);
        unsigned long long base;
        if (ptr == NULL || !PyLong_Check(ptr)) return 0;
        base = PyLong_AsUnsignedLongLongMask(ptr);
        if (i < self->nslots)
            base += (unsigned long long)PyLong_AsLongLong(SLOT(t, t_offset)) *
                    (unsigned long long)self->itemsizes[i];
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        self->now[i] = base;
    }
    return 1;
}

/* Every parameter into memory that moved (self->now against the launcher's bases) rewritten,
 * and each node holding one updated; the bases are -1 until every update went through (the
 * next replay then rewrites them all, as NativeLauncher._update leaves them). 0, the driver's
 * error, or -1 with an exception set. */
static int rewrite_nodes(GraphLaunchCore *self) {
    int err = 0, moved = 0;
    for (Py_ssize_t i = 0; i < self->nbases; i++) {
        if (PyLong_AsUnsignedLongLongMask(PyList_GET_ITEM(self->bases, i)) == self->now[i])
            continue;
        if (!moved)  /* (a replay where nothing moved, the usual one, touches no node) */
            memset(self->dirty, 0, self->nnodes ? self->nnodes : 1);
        for (Py_ssize_t s = self->site_starts[i]; s < self->site_starts[i + 1]; s++) {
            CSite *c = &self->sites[s];
            *c->word = self->now[i] + (unsigned long long)c->delta;
            self->dirty[c->node] = 1;
        }
        moved = 1;
    }
    if (PyErr_Occurred()) return -1;
    if (!moved) return 0;
    for (Py_ssize_t i = 0; i < self->nbases; i++)
        PyList_SetItem(self->bases, i, Py_NewRef(minus_one));
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < self->nnodes && !err; k++)
        if (self->dirty[k])
            err = self->set_params(self->exec, self->node_handles[k], self->node_params[k]);
    Py_END_ALLOW_THREADS
    if (err) return err;
    for (Py_ssize_t i = 0; i < self->nbases; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(self->now[i]);
        if (v == NULL) return -1;
        PyList_SetItem(self->bases, i, v);
    }
    return 0;
}

static PyObject *graph_call(GraphLaunchCore *self, PyObject *tensors) {
    PyObject *launcher, *now, *locked, *outs = NULL, *answer, *done, *result = NULL;
    PyObject *what = str_what;
    int fits, begun, entered = 0, err = 0, here;
    if (!slots_fit(self, tensors)) return Py_NewRef(fallback);
    if ((fits = runtime_free(self->base.runtime)) <= 0)
        return fits < 0 ? NULL : Py_NewRef(fallback);
    if ((launcher = PyObject_CallNoArgs(self->launcher)) == NULL) return NULL;
    if (launcher == Py_None) {  /* closed and gone: the Python path says so */
        Py_DECREF(launcher);
        return Py_NewRef(fallback);
    }
    locked = PyObject_CallMethodOneArg(self->lock, str_acquire, Py_False);
    if (locked != Py_True) {  /* another thread's replay holds the nodes: the Python path waits */
        Py_DECREF(launcher);
        if (locked == NULL) return NULL;
        Py_DECREF(locked);
        return Py_NewRef(fallback);
    }
    Py_DECREF(locked);
    begun = cuda_begin(&self->base, tensors, &answer, &outs, &entered);
    if (begun <= 0) {
        if (begun == 0) {
            Py_DECREF(answer);
            result = Py_NewRef(fallback);  /* the Python path opens a session where it must */
        }
        goto unlock;
    }
    if ((now = PyObject_GetAttr(launcher, str_scalars)) == NULL) goto unlock;
    /* the executable's scalars and every address read: the replay runs here (the nodes whose
     * pointers moved rewritten), else in the launcher's Python */
    here = now == self->scalars && replay_bases(self, tensors, outs);
    Py_DECREF(now);
    if (here) {
        if ((err = rewrite_nodes(self)) < 0) goto unlock;
        if (err) {
            what = str_update_what;
        } else {
            Py_BEGIN_ALLOW_THREADS
            err = self->graph_launch(self->exec, self->stream);
            Py_END_ALLOW_THREADS
            if (!err) result = outputs_tuple(outs, self->base.several);
        }
    }
unlock:
    done = PyObject_CallMethodNoArgs(self->lock, str_release);
    if (done == NULL) Py_CLEAR(result);
    Py_XDECREF(done);
    if (begun > 0 && result == NULL && !PyErr_Occurred()) {
        if (err > 0) {  /* the launcher's typed error */
            PyObject *code = PyLong_FromLong(err), *exc = NULL;
            if (code != NULL)
                exc = PyObject_CallMethodObjArgs(launcher, str_failed, code, what, NULL);
            Py_XDECREF(code);
            if (exc != NULL) {
                PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
                Py_DECREF(exc);
            }
        } else {  /* new scalar values (or an address not read here): the launcher's rewrite */
            PyObject *made = PyObject_CallMethodObjArgs(launcher, str_moved, tensors, outs,
                                                        self->scalars, NULL);
            if (made != NULL) {
                result = PyList_Check(made) ? outputs_tuple(made, self->base.several) : NULL;
                if (result == NULL && !PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "the launcher's rewrite returned no list");
                Py_DECREF(made);
            }
        }
    }
    if (begun > 0 && end_context(&self->base, entered) < 0) Py_CLEAR(result);
    Py_XDECREF(outs);
    Py_DECREF(launcher);
    return result;
}

static PyObject *graph_tp_call(PyObject *self, PyObject *args, PyObject *kwds) {
    PyObject *tensors;
    if (!PyArg_ParseTuple(args, "O!", &PyTuple_Type, &tensors)) return NULL;
    return graph_call((GraphLaunchCore *)self, tensors);
}

static PyTypeObject GraphLaunchCore_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tenferro_host.provider._ccall.GraphLaunchCore",
    .tp_basicsize = sizeof(GraphLaunchCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A native CUDA graph's replay (checks, guard, outputs, cuGraphLaunch), compiled.",
    .tp_new = graph_new,
    .tp_dealloc = (destructor)graph_dealloc,
    .tp_traverse = (traverseproc)graph_traverse,
    .tp_clear = (inquiry)graph_clear,
    .tp_call = graph_tp_call,
};

/* ---- the CPU core ------------------------------------------------------------------------ */

enum { FRESH = 0, WHOLE = 1, VIEW = 2 };

typedef struct {
    Py_ssize_t position;
    int which, index, how;
    PyObject *nbytes, *shape, *npdt, *offset, *strides; /* borrowed from the core's `launches` */
} CView;

typedef struct {
    PyObject *fn, *template_;
    int bare;
    Py_ssize_t nviews;
    CView *views;
} CpuLaunch;

typedef struct {
    PyObject_HEAD
    PyObject *runtime, *domain, *empty, *ndarray, *poison, *fail, *outputs, *exclusive;
    PyObject *storage_type, *launch_data, *used;
    Py_ssize_t c_array, nlaunches;
    int several;
    CpuLaunch *launches;
} UfuncCore;

static int cpu_traverse(UfuncCore *self, visitproc visit, void *arg) {
    Py_VISIT(self->runtime);
    Py_VISIT(self->domain);
    Py_VISIT(self->empty);
    Py_VISIT(self->ndarray);
    Py_VISIT(self->poison);
    Py_VISIT(self->fail);
    Py_VISIT(self->outputs);
    Py_VISIT(self->exclusive);
    Py_VISIT(self->storage_type);
    Py_VISIT(self->launch_data);
    Py_VISIT(self->used);
    return 0;
}

static int cpu_clear(UfuncCore *self) {
    Py_CLEAR(self->runtime);
    Py_CLEAR(self->domain);
    Py_CLEAR(self->empty);
    Py_CLEAR(self->ndarray);
    Py_CLEAR(self->poison);
    Py_CLEAR(self->fail);
    Py_CLEAR(self->outputs);
    Py_CLEAR(self->exclusive);
    Py_CLEAR(self->storage_type);
    Py_CLEAR(self->launch_data);
    Py_CLEAR(self->used);
    return 0;
}

static void cpu_dealloc(UfuncCore *self) {
    PyObject_GC_UnTrack(self);
    if (self->launches != NULL) {
        for (Py_ssize_t i = 0; i < self->nlaunches; i++) PyMem_Free(self->launches[i].views);
        PyMem_Free(self->launches);
    }
    cpu_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* UfuncCore(runtime, storage_type, empty, ndarray, poison, fail, outputs, exclusive, launches):
 * outputs (allocator, nbytes, count, numpy dtype, (dtype, shape, strides)); poison the object
 * whose `poison_fresh_memory` says whether fresh memory is poisoned (the runtime's allocator
 * then makes every output); fail(fn, exc) raises the launch's typed error;
 * launches (fn, bare, template: list, views: ((position, which, index, how, nbytes, shape,
 * numpy dtype, byte offset, byte strides), ...)), every one a plain call (arguments, then the
 * one output, positional). */
static PyObject *cpu_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *runtime, *stype, *empty, *ndarray, *poison, *fail, *outputs, *exclusive, *used;
    PyObject *launches;
    UfuncCore *self;
    if (!PyArg_ParseTuple(args, "OO!OOOOO!O!O!O!:UfuncCore", &runtime, &PyType_Type, &stype,
                          &empty, &ndarray, &poison, &fail, &PyTuple_Type, &outputs, &PyTuple_Type,
                          &exclusive, &PyTuple_Type, &used, &PyTuple_Type, &launches))
        return NULL;
    self = (UfuncCore *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->runtime = Py_NewRef(runtime);
    self->storage_type = Py_NewRef(stype);
    self->empty = Py_NewRef(empty);
    self->ndarray = Py_NewRef(ndarray);
    self->poison = Py_NewRef(poison);
    self->fail = Py_NewRef(fail);
    self->outputs = Py_NewRef(outputs);
    self->exclusive = Py_NewRef(exclusive);
    self->used = Py_NewRef(used);
    self->launch_data = Py_NewRef(launches);
    self->several = PyTuple_GET_SIZE(outputs) != 1;
    if ((self->domain = PyObject_GetAttrString(runtime, "domain")) == NULL) goto fail;
    if (slot_offset(stype, "array", &self->c_array) < 0) goto fail;
    self->nlaunches = PyTuple_GET_SIZE(launches);
    self->launches = PyMem_Calloc(self->nlaunches ? self->nlaunches : 1, sizeof(CpuLaunch));
    if (self->launches == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < self->nlaunches; i++) {
        CpuLaunch *l = &self->launches[i];
        PyObject *views;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(launches, i), "OpO!O!", &l->fn, &l->bare,
                              &PyList_Type, &l->template_, &PyTuple_Type, &views))
            goto fail;
        l->nviews = PyTuple_GET_SIZE(views);
        l->views = PyMem_Calloc(l->nviews ? l->nviews : 1, sizeof(CView));
        if (l->views == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        for (Py_ssize_t k = 0; k < l->nviews; k++) {
            CView *c = &l->views[k];
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(views, k), "niiiOOOOO", &c->position,
                                  &c->which, &c->index, &c->how, &c->nbytes, &c->shape,
                                  &c->npdt, &c->offset, &c->strides))
                goto fail;
            if (c->position < 0 || c->position >= PyList_GET_SIZE(l->template_)) {
                PyErr_SetString(PyExc_ValueError, "a view's position is outside the arguments");
                goto fail;
            }
        }
    }
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

static PyObject *cpu_output(UfuncCore *self, PyObject *output, PyObject *seam, int poisoned) {
    PyObject *array, *storage;
    if (seam != NULL) return from_seam(seam, PyTuple_GET_ITEM(output, 1), PyTuple_GET_ITEM(output, 4));
    if (!poisoned) {
        PyObject *args[2] = {PyTuple_GET_ITEM(output, 2), PyTuple_GET_ITEM(output, 3)};
        array = PyObject_Vectorcall(self->empty, args, 2, NULL);
        if (array != NULL) {
            storage = owned_storage(self->storage_type, self->runtime, self->domain,
                                    PyTuple_GET_ITEM(output, 1));
            if (storage != NULL) set_slot(storage, self->c_array, array);
            Py_DECREF(array);
            return storage;
        }
        PyErr_Clear();  /* the runtime's allocation raises the typed error */
    }
    return PyObject_CallNoArgs(PyTuple_GET_ITEM(output, 0));
}

static PyObject *cpu_call(UfuncCore *self, PyObject *tensors) {
    PyObject *outs, *result = NULL, *stack[16], **argv = stack, *seam = NULL;
    Py_ssize_t nout = PyTuple_GET_SIZE(self->outputs);
    int truth, poisoned;
    if (!inputs_fit(tensors, self->used, self->storage_type)) return Py_NewRef(fallback);
    if ((truth = read_only(tensors, self->exclusive)) != 0)
        return truth < 0 ? NULL : Py_NewRef(replay_miss);
    poisoned = attr_true(self->poison, str_poison);
    if (poisoned < 0 || (outs = PyList_New(nout)) == NULL) return NULL;
    seam = framework_allocator(self->runtime);
    for (Py_ssize_t j = 0; j < nout; j++) {
        PyObject *output = PyTuple_GET_ITEM(self->outputs, j), *storage, *t;
        if ((storage = cpu_output(self, output, seam, poisoned)) == NULL) goto done;
        t = new_tensor(storage, PyTuple_GET_ITEM(output, 4));
        Py_DECREF(storage);
        if (t == NULL) goto done;
        PyList_SET_ITEM(outs, j, t);
    }
    for (Py_ssize_t i = 0; i < self->nlaunches; i++) {
        CpuLaunch *l = &self->launches[i];
        Py_ssize_t nargs = PyList_GET_SIZE(l->template_), made = 0;
        PyObject *r;
        if (nargs > 16 && (argv = PyMem_Malloc(nargs * sizeof(PyObject *))) == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t k = 0; k < nargs; k++) argv[k] = Py_NewRef(PyList_GET_ITEM(l->template_, k));
        made = nargs;
        for (Py_ssize_t k = 0; k < l->nviews; k++) {
            CView *c = &l->views[k];
            PyObject *t = c->which ? PyList_GET_ITEM(outs, c->index)
                                   : PyTuple_GET_ITEM(tensors, c->index);
            PyObject *storage = SLOT(t, t_storage), *array = SLOT(storage, self->c_array), *arg;
            int whole = c->how == FRESH;
            if (c->how == WHOLE) {
                PyObject *dt = PyObject_GetAttr(array, str_dtype);
                if (dt == NULL) goto launch_failed;
                whole = dt == c->npdt &&
                        PyObject_RichCompareBool(SLOT(storage, s_nbytes), c->nbytes, Py_EQ) == 1;
                Py_DECREF(dt);
                if (PyErr_Occurred()) goto launch_failed;
            }
            if (whole)
                arg = l->bare ? Py_NewRef(array) : PyObject_CallMethodNoArgs(array, str_view);
            else {
                PyObject *a[5] = {c->shape, c->npdt, array, c->offset, c->strides};
                arg = PyObject_Vectorcall(self->ndarray, a, 5, NULL);
            }
            if (arg == NULL) goto launch_failed;
            Py_SETREF(argv[c->position], arg);
        }
        r = PyObject_Vectorcall(l->fn, argv, nargs, NULL);
        for (Py_ssize_t k = 0; k < made; k++) Py_DECREF(argv[k]);
        if (argv != stack) PyMem_Free(argv);
        argv = stack;
        if (r == NULL) {
            PyObject *type, *value, *tb;
            if (!PyErr_ExceptionMatches(PyExc_Exception)) goto done;
            PyErr_Fetch(&type, &value, &tb);
            PyErr_NormalizeException(&type, &value, &tb);
            if (tb != NULL) PyException_SetTraceback(value, tb);
            r = PyObject_CallFunctionObjArgs(self->fail, l->fn, value, NULL);
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
            Py_XDECREF(r);  /* fail() raises: r is NULL */
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_SystemError, "a CPU launch failed and nothing was raised");
            goto done;
        }
        Py_DECREF(r);
        continue;
    launch_failed:
        for (Py_ssize_t k = 0; k < made; k++) Py_DECREF(argv[k]);
        if (argv != stack) PyMem_Free(argv);
        goto done;
    }
    result = outputs_tuple(outs, self->several);
done:
    Py_XDECREF(seam);
    Py_DECREF(outs);
    return result;
}

static PyTypeObject UfuncCore_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tenferro_host.provider._ccall.UfuncCore",
    .tp_basicsize = sizeof(UfuncCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A CPU op replay's guard, outputs and ufunc calls, compiled.",
    .tp_new = cpu_new,
    .tp_dealloc = (destructor)cpu_dealloc,
    .tp_traverse = (traverseproc)cpu_traverse,
    .tp_clear = (inquiry)cpu_clear,
    .tp_call = core_tp_call,
};

/* ---- the storages' finalizer ------------------------------------------------------------ */

static Py_ssize_t d_release;

/* DeviceStorage.__del__, compiled: queue the storage's release on its runtime's deferred queue
 * (one append, as the Python finalizer; an error, as at interpreter shutdown, is dropped). */
static PyObject *queue_release(PyObject *self, PyObject *unused) {
    PyObject *release = SLOT(self, d_release), *runtime = SLOT(self, s_runtime), *queue, *done;
    if (release == NULL || release == Py_None || runtime == NULL) Py_RETURN_NONE;
    queue = PyObject_GetAttr(runtime, str_deferred);
    done = queue == NULL ? NULL : PyObject_CallMethodOneArg(queue, str_append, release);
    Py_XDECREF(queue);
    Py_XDECREF(done);
    PyErr_Clear();
    Py_RETURN_NONE;
}

static PyMethodDef queue_release_def = {
    "__del__", queue_release, METH_NOARGS,
    "Queue the release on the runtime's deferred queue (the compiled finalizer).",
};

/* finalizer(DeviceStorage): the compiled __del__ of `DeviceStorage` (a method descriptor). */
static PyObject *finalizer(PyObject *module, PyObject *type) {
    if (!PyType_Check(type) || !PyType_IsSubtype((PyTypeObject *)type, storage_type)) {
        PyErr_SetString(PyExc_TypeError, "finalizer(type): a Storage class (after configure)");
        return NULL;
    }
    if (slot_offset(type, "release", &d_release) < 0) return NULL;
    return PyDescr_NewMethod((PyTypeObject *)type, &queue_release_def);
}

/* ---- the call ---------------------------------------------------------------------------- */

/* Whether a key's state is a plan to replay (not new, blocked or still learning). */
static int is_replay(PyObject *state) {
    return state != Py_None && state != blocked && (PyObject *)Py_TYPE(state) != learning_type;
}

static PyObject *unplanned(PyObject *key, PyObject *state) {
    PyObject *pair = PyTuple_Pack(2, key, state), *out;
    if (pair == NULL) return NULL;
    out = PyObject_CallOneArg(unplanned_type, pair);
    Py_DECREF(pair);
    return out;
}

/* A core's run on `tensors`; FALLBACK for anything that is not a core. */
static PyObject *run_core(PyObject *core, PyObject *tensors) {
    if (Py_IS_TYPE(core, &DriverLaunchCore_Type))
        return cuda_call((DriverLaunchCore *)core, tensors);
    if (Py_IS_TYPE(core, &UfuncCore_Type)) return cpu_call((UfuncCore *)core, tensors);
    return Py_NewRef(fallback);
}

/* Either core called on its own: core(tensors). */
static PyObject *core_tp_call(PyObject *self, PyObject *args, PyObject *kwds) {
    PyObject *tensors;
    if (!PyArg_ParseTuple(args, "O!", &PyTuple_Type, &tensors)) return NULL;
    return run_core(self, tensors);
}

/* A replay run: its compiled core, else (or where the core answers FALLBACK) its __call__. */
static PyObject *run_replay(PyObject *plan, PyObject *tensors) {
    PyObject *core = NULL, *result;
    if (PyObject_TypeCheck(plan, replay_type)) core = SLOT(plan, r_core);
    if (core != NULL) {
        Py_INCREF(core);  /* held for the call: a plan dropped meanwhile frees nothing in use */
        result = run_core(core, tensors);
        Py_DECREF(core);
    } else
        result = Py_NewRef(fallback);
    if (result == fallback) {
        Py_DECREF(result);
        result = PyObject_CallOneArg(plan, tensors);
    }
    return result;
}

typedef int (*record_fn)(void *, void *);
typedef int (*wait_fn)(void *, void *, unsigned);

/* order_streams(record, wait, event, waiter, signaller) -> CUresult: `waiter` waits for the work
 * already on `signaller` (cuEventRecord(event, signaller), then cuStreamWaitEvent(waiter, event,
 * 0) through the driver's entry points `record` and `wait`), the GIL released around both; the
 * caller holds the lock that keeps another thread's record of `event` between the two out. */
static PyObject *order_streams(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    void *p[5];
    int err;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "order_streams(record, wait, event, waiter, signaller)");
        return NULL;
    }
    for (int i = 0; i < 5; i++) {
        p[i] = as_pointer(args[i]);
        if (PyErr_Occurred()) return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    err = ((record_fn)p[0])(p[2], p[4]);
    if (!err) err = ((wait_fn)p[1])(p[3], p[2], 0);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(err);
}

static PyObject *replay(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *plan, *result;
    if (nargs != 2 || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "replay(plan, tensors: tuple)");
        return NULL;
    }
    plan = Py_NewRef(args[0]);
    result = run_replay(plan, args[1]);
    Py_DECREF(plan);
    return result;
}

static PyObject *call(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *key, *plan, *result;
    if (nargs != 3 || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "call(plans, tensors: tuple, attrs)");
        return NULL;
    }
    if (find_state(args[0], args[1], args[2], &key, &plan) < 0) return NULL;
    if (!is_replay(plan))
        result = unplanned(key, plan);
    else if ((result = run_replay(plan, args[1])) == replay_miss) {
        Py_DECREF(result);
        result = unplanned(key, blocked);
    }
    Py_DECREF(key);
    Py_DECREF(plan);
    return result;
}

static int offsets_of(PyObject *type, const char *const *names, Py_ssize_t *const *out) {
    for (int i = 0; names[i] != NULL; i++)
        if (slot_offset(type, names[i], out[i]) < 0) return -1;
    return 0;
}

/* ---- an op handle's call and host.run without a Python frame --------------------------------
 *
 * OpHandle.__call__ and Host.run are these where the extension is (method descriptors on the
 * classes); their Python methods stay the reference, and run for anything but a call with
 * tensors only whose key is planned (attributes, `backend=`, a first call, a replaced op), or
 * while the compiled call is off: `_op_handle.CALL` not this module's `call`, or
 * `_op_plan.ENABLED` false (read per call: tests switch either). */
static PyTypeObject *handle_type;
static Py_ssize_t h_plans, h_ops, h_record;
static PyObject *handle_globals, *plan_globals, *call_builtin, *python_call, *python_run;
static PyObject *str_call_global, *str_enabled, *str_handles, *str_call_full;

static int compiled_on(void) {
    return handle_globals != NULL &&
           PyDict_GetItemWithError(handle_globals, str_call_global) == call_builtin &&
           PyDict_GetItemWithError(plan_globals, str_enabled) == Py_True;
}

/* `python(self, *args)` with the method's vectorcall arguments: the Python method. */
static PyObject *python_method(PyObject *python, PyObject *self, PyObject *const *args,
                               Py_ssize_t nargs, PyObject *kwnames) {
    Py_ssize_t n = nargs + (kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames));
    PyObject *small[8], **stack = small, *out;
    if (n + 1 > 8 && (stack = PyMem_Malloc((n + 1) * sizeof(PyObject *))) == NULL)
        return PyErr_NoMemory();
    stack[0] = self;
    for (Py_ssize_t i = 0; i < n; i++) stack[i + 1] = args[i];
    out = PyObject_Vectorcall(python, stack, nargs + 1, kwnames);
    if (stack != small) PyMem_Free(stack);
    return out;
}

/* A call of `handle` on `tensors` (no attributes) whose key is planned: the replay's result,
 * the full path's after a replay miss (as the Python method: `_call_full(runtime, tensors,
 * {})`), or NULL without an exception for the Python method (nothing was run: not planned). */
static PyObject *planned_call(PyObject *handle, PyObject *tensors) {
    PyObject *plans = SLOT(handle, h_plans), *key, *plan, *result = NULL;
    if (plans == NULL || find_state(plans, tensors, NULL, &key, &plan) < 0) return NULL;
    if (!is_replay(plan)) goto done;
    if ((result = run_replay(plan, tensors)) == replay_miss) {
        PyObject *attrs = PyDict_New();
        Py_DECREF(result);
        result = attrs == NULL ? NULL
                               : PyObject_CallMethodObjArgs(handle, str_call_full,
                                                            PyTuple_GET_ITEM(key, 4), tensors,
                                                            attrs, NULL);
        Py_XDECREF(attrs);
    }
done:
    Py_DECREF(key);
    Py_DECREF(plan);
    return result;
}

/* A planned call of `handle` on the tensors args[0 .. n - 1] (see planned_call). */
static PyObject *planned_call_of(PyObject *handle, PyObject *const *args, Py_ssize_t n) {
    PyObject *tensors = PyTuple_New(n), *result;
    if (tensors == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) PyTuple_SET_ITEM(tensors, i, Py_NewRef(args[i]));
    result = planned_call(handle, tensors);
    Py_DECREF(tensors);
    return result;
}

/* OpHandle.__call__: handle(*tensors) planned in C, else the Python method. */
static PyObject *handle_call(PyObject *self, PyObject *const *args, size_t nargsf,
                             PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames == NULL && nargs > 0 && compiled_on()) {
        PyObject *result = planned_call_of(self, args, nargs);
        if (result != NULL || PyErr_Occurred()) return result;
    }
    if (PyErr_Occurred()) return NULL;
    return python_method(python_call, self, args, nargs, kwnames);
}

/* Host.run: run(name, *tensors) planned in C where the host's handle of `name` is current
 * (the registry's record of `name` is the handle's), else the Python method. */
static PyObject *host_run(PyObject *self, PyObject *const *args, size_t nargsf,
                          PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames == NULL && nargs > 1 && PyUnicode_CheckExact(args[0]) && compiled_on()) {
        PyObject *handles = instance_attr(self, str_handles), *handle = NULL, *ops, *result;
        if (handles != NULL && PyDict_CheckExact(handles))
            handle = Py_XNewRef(PyDict_GetItemWithError(handles, args[0]));
        Py_XDECREF(handles);
        if (handle != NULL && Py_IS_TYPE(handle, handle_type) &&
            (ops = SLOT(handle, h_ops)) != NULL && PyDict_CheckExact(ops) &&
            PyDict_GetItemWithError(ops, args[0]) == SLOT(handle, h_record)) {
            result = planned_call_of(handle, args + 1, nargs - 1);
            Py_DECREF(handle);
            if (result != NULL || PyErr_Occurred()) return result;
        } else
            Py_XDECREF(handle);
    }
    if (PyErr_Occurred()) return NULL;
    return python_method(python_run, self, args, nargs, kwnames);
}

static PyMethodDef handle_call_def = {
    "__call__", (PyCFunction)(void (*)(void))handle_call, METH_FASTCALL | METH_KEYWORDS,
    "Run the op (compiled: a planned call with tensors only replays here; see the Python "
    "method, the reference).",
};
static PyMethodDef host_run_def = {
    "run", (PyCFunction)(void (*)(void))host_run, METH_FASTCALL | METH_KEYWORDS,
    "Run op `name` on the backend its tensors live on, inside a fresh session (compiled: a "
    "planned call with tensors only replays here; see the Python method, the reference).",
};

/* handle_method(OpHandle, its Python __call__, _op_handle's globals, _op_plan's globals)
 * -> the compiled __call__. */
static PyObject *handle_method(PyObject *module, PyObject *args) {
    PyObject *type, *python, *hg, *pg, *call_fn;
    static const char *const slots[] = {"_plans", "_ops", "record", NULL};
    Py_ssize_t *const out[] = {&h_plans, &h_ops, &h_record};
    if (!PyArg_ParseTuple(args, "O!OO!O!:handle_method", &PyType_Type, &type, &python,
                          &PyDict_Type, &hg, &PyDict_Type, &pg))
        return NULL;
    if (offsets_of(type, slots, out) < 0) return NULL;
    if ((call_fn = PyObject_GetAttrString(module, "call")) == NULL) return NULL;
    Py_XSETREF(call_builtin, call_fn);
    Py_XSETREF(handle_type, (PyTypeObject *)Py_NewRef(type));
    Py_XSETREF(python_call, Py_NewRef(python));
    Py_XSETREF(handle_globals, Py_NewRef(hg));
    Py_XSETREF(plan_globals, Py_NewRef(pg));
    return PyDescr_NewMethod((PyTypeObject *)type, &handle_call_def);
}

/* run_method(Host, its Python run) -> the compiled run (after handle_method). */
static PyObject *run_method(PyObject *module, PyObject *args) {
    PyObject *type, *python;
    if (!PyArg_ParseTuple(args, "O!O:run_method", &PyType_Type, &type, &python)) return NULL;
    if (handle_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "run_method: handle_method first");
        return NULL;
    }
    Py_XSETREF(python_run, Py_NewRef(python));
    return PyDescr_NewMethod((PyTypeObject *)type, &host_run_def);
}

/* configure(Tensor, Storage, OpReplay, Learning, BLOCKED, UNHASHABLE, REPLAY_MISS, FALLBACK,
 *           Unplanned, exact_kind, thread_token) */
static PyObject *configure(PyObject *module, PyObject *args) {
    PyObject *tensor, *storage, *replay;
    static const char *const tensor_slots[] = {"storage", "dtype", "shape", "strides",
                                               "offset", "_compact", NULL};
    static const char *const storage_slots[] = {"runtime", "domain", "nbytes", "kind",
                                                "read_only", NULL};
    static const char *const replay_slots[] = {"core", NULL};
    Py_ssize_t *const t_out[] = {&t_storage, &t_dtype, &t_shape, &t_strides, &t_offset,
                                 &t_compact};
    Py_ssize_t *const s_out[] = {&s_runtime, &s_domain, &s_nbytes, &s_kind, &s_read_only};
    Py_ssize_t *const r_out[] = {&r_core};
    PyObject *learning, *blk, *unh, *miss, *fb, *unpl, *ek, *tt;
    if (!PyArg_ParseTuple(args, "O!O!O!OOOOOOOO:configure", &PyType_Type, &tensor, &PyType_Type,
                          &storage, &PyType_Type, &replay, &learning, &blk, &unh, &miss, &fb,
                          &unpl, &ek, &tt))
        return NULL;
    if (offsets_of(tensor, tensor_slots, t_out) < 0 || offsets_of(storage, storage_slots, s_out) < 0 ||
        offsets_of(replay, replay_slots, r_out) < 0)
        return NULL;
    Py_XSETREF(tensor_type, (PyTypeObject *)Py_NewRef(tensor));
    Py_XSETREF(storage_type, (PyTypeObject *)Py_NewRef(storage));
    Py_XSETREF(replay_type, (PyTypeObject *)Py_NewRef(replay));
    Py_XSETREF(learning_type, Py_NewRef(learning));
    Py_XSETREF(blocked, Py_NewRef(blk));
    Py_XSETREF(unhashable, Py_NewRef(unh));
    Py_XSETREF(replay_miss, Py_NewRef(miss));
    Py_XSETREF(fallback, Py_NewRef(fb));
    Py_XSETREF(unplanned_type, Py_NewRef(unpl));
    Py_XSETREF(exact_kind_fn, Py_NewRef(ek));
    Py_XSETREF(thread_token_fn, Py_NewRef(tt));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS, "Hand over the classes and markers the call uses."},
    {"find", (PyCFunction)(void (*)(void))find, METH_FASTCALL,
     "find(plans, tensors, attrs) -> (key, state): PlanTable.find, compiled."},
    {"call", (PyCFunction)(void (*)(void))call, METH_FASTCALL,
     "call(plans, tensors, attrs) -> the result, or Unplanned((key, state))."},
    {"finalizer", finalizer, METH_O, "finalizer(DeviceStorage) -> its compiled __del__."},
    {"handle_method", handle_method, METH_VARARGS,
     "handle_method(OpHandle, __call__, its module's globals, _op_plan's) -> compiled __call__."},
    {"run_method", run_method, METH_VARARGS, "run_method(Host, run) -> the compiled run."},
    {"xla_configure", tfh_xla_configure, METH_VARARGS,
     "xla_configure(Call, BufferView, dtype names by XLA code): the XLA FFI handler's classes."},
    {"xla_handler", tfh_xla_handler, METH_VARARGS,
     "xla_handler(target, gpu, body) -> the C handler's address, body(call) run per call."},
    {"order_streams", (PyCFunction)(void (*)(void))order_streams, METH_FASTCALL,
     "order_streams(record, wait, event, waiter, signaller) -> CUresult of the two calls."},
    {"replay", (PyCFunction)(void (*)(void))replay, METH_FASTCALL,
     "replay(plan, tensors) -> the plan's result (its core, else its __call__) or REPLAY_MISS."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_ccall",
    "The compiled planned call (see tenferro_host.provider._compiled).", -1, methods,
};

PyMODINIT_FUNC PyInit__ccall(void) {
    PyObject *m;
    struct {
        PyObject **at;
        const char *text;
    } names[] = {
        {&str_hot, "hot"},           {&str_capture, "active_capture"},
        {&str_host, "host"},         {&str_observes, "observes_sessions"},
        {&str_threads, "_session_threads"},
        {&str_hex, "hex"},           {&str_closed, "closed"},
        {&str_debug_sync, "debug_sync"},
        {&str_refuse_wait, "refuse_wait"},
        {&str_pop, "pop"},           {&str_append, "append"},
        {&str_hits, "hits"},         {&str_block, "block"},
        {&str_owned, "owned"},       {&str_dtype, "dtype"},
        {&str_view, "view"},         {&str_allocate, "_allocate"},
        {&str_poison, "poison_fresh_memory"},
        {&str_deferred, "deferred"},
        {&str_call_global, "CALL"},  {&str_enabled, "ENABLED"},
        {&str_handles, "_handles"},  {&str_call_full, "_call_full"},
        {&str_acquire, "acquire"},   {&str_release, "release"},
        {&str_scalars, "_scalars"},  {&str_moved, "_launch_with"},
        {&str_failed, "_failed"},    {&str_what, "launching it (cuGraphLaunch)"},
        {&str_update_what, "updating a node (cuGraphExecKernelNodeSetParams)"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if ((*names[i].at = PyUnicode_InternFromString(names[i].text)) == NULL) return NULL;
    if ((zero = PyLong_FromLong(0)) == NULL || (one = PyLong_FromLong(1)) == NULL ||
        (minus_one = PyLong_FromLong(-1)) == NULL)
        return NULL;
    if (PyType_Ready(&DriverLaunchCore_Type) < 0 || PyType_Ready(&GraphLaunchCore_Type) < 0 ||
        PyType_Ready(&UfuncCore_Type) < 0)
        return NULL;
    if ((m = PyModule_Create(&moduledef)) == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "DriverLaunchCore", (PyObject *)&DriverLaunchCore_Type) < 0 ||
        PyModule_AddObjectRef(m, "GraphLaunchCore", (PyObject *)&GraphLaunchCore_Type) < 0 ||
        PyModule_AddObjectRef(m, "UfuncCore", (PyObject *)&UfuncCore_Type) < 0 ||
        PyModule_AddStringConstant(m, "SOURCE_HASH", SOURCE_HASH) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
