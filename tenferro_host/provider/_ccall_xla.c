/* The compiled call's XLA FFI entry: one C handler per platform for every op exported to JAX.
 *
 * XLA calls an FFI target's handler with a call frame (xla/ffi/api/c_api.h, API 0.x, whose
 * structs are mirrored here as tenferro_host/interop/_xla_ffi.py mirrors them in ctypes, the
 * reference and fallback). The handler answers XLA's metadata query (no traits: XLA never
 * captures it into a command buffer it replays without Python), ignores the stages before
 * execution, and at execution decodes the frame into the `Call` the Python body takes — its
 * argument and result buffers as `BufferView`s, its string attributes, and on a GPU XLA's stream
 * and device — without a Python frame. The handler has no user data, so the body is found by
 * the frame's string attribute `target` (the op's FFI target name) among the ones registered per
 * platform. A body returns None, or (message, XLA error code) for an error XLA reports.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>

#define API_MAJOR 0
#define API_MINOR 1 /* the oldest minor whose call frame this reads */
#define EXT_METADATA 1
#define STAGE_EXECUTE 3
#define ATTR_STRING 4
#define ERROR_INTERNAL 13
#define STRUCT_SIZE(type, last) (offsetof(type, last) + sizeof(((type *)0)->last))

typedef struct Ext {
    size_t struct_size;
    int type;
    struct Ext *next;
} Ext;

typedef struct {
    size_t struct_size;
    Ext *extension_start;
    int major_version, minor_version;
} ApiVersion;

typedef struct {
    size_t struct_size;
    ApiVersion api_version;
    uint32_t traits;
    int64_t state_type_id;
} Metadata;

typedef struct {
    Ext extension_base;
    Metadata *metadata;
} MetadataExt;

typedef struct {
    size_t struct_size;
    Ext *extension_start;
    int dtype;
    void *data;
    int64_t rank;
    int64_t *dims;
} Buffer;

typedef struct { /* XLA_FFI_Args and XLA_FFI_Rets */
    size_t struct_size;
    Ext *extension_start;
    int64_t size;
    int *types;
    void **items;
} List;

typedef struct {
    const char *ptr;
    size_t len;
} ByteSpan;

typedef struct {
    size_t struct_size;
    Ext *extension_start;
    int64_t size;
    int *types;
    ByteSpan **names;
    void **attrs;
} Attrs;

typedef struct {
    size_t struct_size;
    Ext *extension_start;
    const char *message;
    int errc;
} ErrorCreateArgs;

typedef struct {
    size_t struct_size;
    Ext *extension_start;
    void *ctx;
    void *stream; /* out */
} StreamGetArgs;

typedef struct {
    size_t struct_size;
    Ext *extension_start;
    void *ctx;
    int32_t device_ordinal; /* out */
} DeviceOrdinalGetArgs;

typedef void *(*api_fn)(void *);

typedef struct {
    size_t struct_size;
    Ext *extension_start;
    ApiVersion api_version;
    void *internal_api;
    api_fn error_create, error_get_message, error_destroy, handler_register, stream_get;
    api_fn type_register, execution_context_get, state_set, state_get, device_memory_allocate;
    api_fn device_memory_free, thread_pool_schedule, thread_pool_num_threads, future_create;
    api_fn future_set_available, future_set_error, run_id_get, device_ordinal_get;
} Api;

typedef struct {
    size_t struct_size;
    Ext *extension_start;
    const Api *api;
    void *ctx;
    int stage;
    List args, rets;
    Attrs attrs;
} CallFrame;

/* what xla_configure() hands over: the Python classes and XLA's dtype codes' names */
static PyTypeObject *call_type, *buffer_type;
static PyObject *dtype_names, *bodies[2]; /* bodies: target name -> body, per platform */

/* An XLA error of `message` (a new error XLA owns), or NULL when even that fails. */
static void *xla_error(const Api *api, const char *message, int code) {
    ErrorCreateArgs args = {STRUCT_SIZE(ErrorCreateArgs, errc), NULL, message, code};
    return api->error_create(&args);
}

/* The Python exception set now as an XLA error (what a body that raised, or a decode, gives). */
static void *python_error(const Api *api) {
    PyObject *type, *value, *tb, *text = NULL;
    const char *message = NULL;
    void *err;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (type != NULL && value != NULL)
        text = PyUnicode_FromFormat("%s: %S", ((PyTypeObject *)type)->tp_name, value);
    message = text ? PyUnicode_AsUTF8(text) : NULL;
    err = xla_error(api, message ? message : "the handler's Python body failed", ERROR_INTERNAL);
    PyErr_Clear();
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return err;
}

/* A tuple subclass (BufferView, Call) made from `items` (stolen) without its Python __new__. */
static PyObject *named(PyTypeObject *type, PyObject *items) {
    PyObject *args, *made = NULL;
    if (items == NULL) return NULL;
    if ((args = PyTuple_Pack(1, items)) != NULL) made = PyTuple_Type.tp_new(type, args, NULL);
    Py_XDECREF(args);
    Py_DECREF(items);
    return made;
}

static PyObject *buffers(const List *list) {
    PyObject *out = PyTuple_New(list->size);
    for (int64_t i = 0; out != NULL && i < list->size; i++) {
        const Buffer *b = (const Buffer *)list->items[i];
        PyObject *code = PyLong_FromLong(b->dtype), *name, *shape, *view;
        name = code ? PyDict_GetItemWithError(dtype_names, code) : NULL;
        Py_XDECREF(code);
        if (name == NULL) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "XLA dtype code %d has no host dtype", b->dtype);
            Py_CLEAR(out);
            break;
        }
        shape = PyTuple_New(b->rank);
        for (int64_t d = 0; shape != NULL && d < b->rank; d++) {
            PyObject *n = PyLong_FromLongLong(b->dims[d]);
            if (n == NULL) Py_CLEAR(shape);
            else PyTuple_SET_ITEM(shape, d, n);
        }
        view = shape == NULL ? NULL
                             : named(buffer_type, Py_BuildValue("(ONN)", name, shape,
                                                                PyLong_FromVoidPtr(b->data)));
        if (view == NULL) Py_CLEAR(out);
        else PyTuple_SET_ITEM(out, i, view);
    }
    return out;
}

/* The frame's string attributes as a dict, and its `target` (borrowed from the dict). */
static PyObject *attributes(const Attrs *attrs, PyObject **target) {
    PyObject *out = PyDict_New();
    *target = NULL;
    for (int64_t i = 0; out != NULL && i < attrs->size; i++) {
        const ByteSpan *name = attrs->names[i], *value = (const ByteSpan *)attrs->attrs[i];
        PyObject *key = PyUnicode_DecodeUTF8(name->ptr, (Py_ssize_t)name->len, NULL), *text;
        if (key == NULL) {
            Py_CLEAR(out);
            break;
        }
        if (attrs->types[i] != ATTR_STRING) {
            PyErr_Format(PyExc_TypeError,
                         "attribute %R is not a string; the bridge passes strings only", key);
            Py_DECREF(key);
            Py_CLEAR(out);
            break;
        }
        text = PyUnicode_DecodeUTF8(value->ptr, (Py_ssize_t)value->len, NULL);
        if (text == NULL || PyDict_SetItem(out, key, text) < 0) Py_CLEAR(out);
        Py_DECREF(key);
        Py_XDECREF(text);
    }
    if (out != NULL) *target = PyDict_GetItemString(out, "target");
    return out;
}

/* XLA's stream and device of a GPU call (0, 0 on the CPU): 0, or -1 with an XLA error made. */
static int placement(const CallFrame *frame, int gpu, void **stream, int *device, void **err) {
    const Api *api = frame->api;
    *stream = NULL;
    *device = 0;
    if (!gpu) return 0;
    {
        StreamGetArgs args = {STRUCT_SIZE(StreamGetArgs, stream), NULL, frame->ctx, NULL};
        if ((*err = api->stream_get(&args)) != NULL) return -1;
        *stream = args.stream;
    }
    if (api->struct_size >= STRUCT_SIZE(Api, device_ordinal_get)) {
        DeviceOrdinalGetArgs args = {STRUCT_SIZE(DeviceOrdinalGetArgs, device_ordinal), NULL,
                                     frame->ctx, 0};
        if ((*err = api->device_ordinal_get(&args)) != NULL) return -1;
        *device = args.device_ordinal;
    } /* (an older XLA, one device) */
    return 0;
}

static void *execute(const CallFrame *frame, int gpu) {
    const Api *api = frame->api;
    void *err = NULL, *stream;
    int device;
    PyObject *target, *attrs, *body, *call, *answer;
    if (placement(frame, gpu, &stream, &device, &err) < 0) return err;
    PyGILState_STATE gil = PyGILState_Ensure();
    attrs = attributes(&frame->attrs, &target);
    body = target == NULL ? NULL : PyDict_GetItemWithError(bodies[gpu], target);
    if (attrs == NULL || body == NULL) {
        if (attrs != NULL && target == NULL)
            PyErr_SetString(PyExc_LookupError,
                            "the call has no string attribute 'target' (the FFI target's name, "
                            "which tenferro_host.interop.jax passes): call the exported op");
        else if (attrs != NULL && !PyErr_Occurred())
            PyErr_Format(PyExc_LookupError, "no tenferro_host FFI body for target %R", target);
        Py_XDECREF(attrs);
        err = python_error(api);
        goto done;
    }
    Py_INCREF(body);
    call = named(call_type, Py_BuildValue("(NNNNi)", buffers(&frame->args), buffers(&frame->rets),
                                          attrs, PyLong_FromVoidPtr(stream), device));
    answer = call == NULL ? NULL : PyObject_CallOneArg(body, call);
    Py_DECREF(body);
    Py_XDECREF(call);
    if (answer == NULL) err = python_error(api);
    else if (answer != Py_None) { /* (message, code): the body's typed error */
        const char *message = NULL;
        int code = ERROR_INTERNAL;
        if (!PyArg_ParseTuple(answer, "si", &message, &code)) err = python_error(api);
        else err = xla_error(api, message, code);
    }
    Py_XDECREF(answer);
done:
    PyGILState_Release(gil);
    return err;
}

static void *handle(CallFrame *frame, int gpu) {
    Ext *ext = frame->extension_start;
    if (ext != NULL && ext->type == EXT_METADATA) { /* what this handler is: no traits */
        Metadata *meta = ((MetadataExt *)ext)->metadata;
        meta->api_version.major_version = API_MAJOR;
        meta->api_version.minor_version = API_MINOR;
        meta->traits = 0;
        return NULL;
    }
    return frame->stage == STAGE_EXECUTE ? execute(frame, gpu) : NULL;
}

static void *handle_cpu(CallFrame *frame) { return handle(frame, 0); }
static void *handle_gpu(CallFrame *frame) { return handle(frame, 1); }

/* xla_configure(Call, BufferView, dtype names by XLA code) */
PyObject *tfh_xla_configure(PyObject *module, PyObject *args) {
    PyObject *call, *buffer, *names;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyType_Type, &call, &PyType_Type, &buffer,
                          &PyDict_Type, &names))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)call, &PyTuple_Type) ||
        !PyType_IsSubtype((PyTypeObject *)buffer, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "Call and BufferView are tuples");
        return NULL;
    }
    for (int gpu = 0; gpu < 2; gpu++)
        if (bodies[gpu] == NULL && (bodies[gpu] = PyDict_New()) == NULL) return NULL;
    Py_XSETREF(call_type, (PyTypeObject *)Py_NewRef(call));
    Py_XSETREF(buffer_type, (PyTypeObject *)Py_NewRef(buffer));
    Py_XSETREF(dtype_names, Py_NewRef(names));
    Py_RETURN_NONE;
}

/* xla_handler(target, gpu, body) -> the handler's address: body(call) runs each call of FFI
 * target `target` on the platform (gpu: CUDA, else the CPU). */
PyObject *tfh_xla_handler(PyObject *module, PyObject *args) {
    PyObject *target, *body;
    int gpu;
    if (!PyArg_ParseTuple(args, "UpO:xla_handler", &target, &gpu, &body)) return NULL;
    if (bodies[gpu] == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "xla_configure() first");
        return NULL;
    }
    if (PyDict_SetItem(bodies[gpu], target, body) < 0) return NULL;
    return PyLong_FromVoidPtr(gpu ? (void *)handle_gpu : (void *)handle_cpu);
}
