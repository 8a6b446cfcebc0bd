"""Kernels and device functions outside the DSL's language; each line ending in a MARK comment is
where the front-end must locate the refusal."""

from tenferro_host import kernel as K


@K.kernel
def shared_in_branch(out: K.Array[K.f32]):
    if K.UNIT_POS == 0:
        s = K.shared(K.f32, 4)  # MARK shared-in-branch
        s[0] = K.f32(1)


@K.kernel
def shared_runtime_size(out: K.Array[K.f32]):
    s = K.shared(K.f32, out.len)  # MARK shared-size
    s[0] = K.f32(1)


@K.kernel
def shared_of_bool(out: K.Array[K.f32]):
    s = K.shared(K.bool_, 4)  # MARK shared-bool
    s[0] = True


@K.func
def declares_shared(x):
    s = K.shared(K.f32, 4)  # MARK shared-in-func
    s[0] = x


@K.kernel
def calls_declares_shared(out: K.Array[K.f32]):
    declares_shared(K.f32(1))


@K.kernel
def barrier_as_value(out: K.Array[K.f32]):
    out[0] = K.f32(K.sync_cube())  # MARK barrier-value
    out[0] = K.f32(1)


@K.kernel
def shared_as_value(out: K.Array[K.f32]):
    out[0] = K.shared(K.f32, 4) + K.f32(1)  # MARK shared-value


@K.kernel
def atomic_on_f16(out: K.Array[K.f16]):
    K.atomic_add(out, 0, K.f16(1))  # MARK atomic-f16


@K.kernel
def two_indices_on_a_vector(out: K.Array[K.f32]):
    out[0, 1] = K.f32(1)  # MARK too-many-indices


@K.kernel
def assign_over_shared(out: K.Array[K.f32]):
    s = K.shared(K.f32, 4)
    s = K.f32(1)  # MARK assign-shared
    out[0] = s


@K.kernel
def reserved_local(out: K.Array[K.f32]):
    tf1_x = K.f32(1)  # MARK reserved
    out[0] = tf1_x


@K.func
def forever(n):
    return forever(n)  # MARK recursion


@K.kernel
def calls_forever(out: K.Array[K.i32]):
    out[0] = forever(K.i32(1))


@K.func
def ping(n):
    return pong(n)


@K.func
def pong(n):
    return ping(n)  # MARK mutual


@K.kernel
def calls_ping(out: K.Array[K.i32]):
    out[0] = ping(K.i32(1))


@K.func
def small(i):
    return i < 4


@K.kernel
def call_in_while(out: K.Array[K.u32]):
    i = K.u32(0)
    while small(i):  # MARK while-call
        i += 1
    out[0] = i


@K.func
def nothing(a, i):
    a[i] = K.f32(0)


@K.kernel
def uses_nothing(out: K.Array[K.f32]):
    out[1] = nothing(out, 0)  # MARK no-value


@K.kernel
def wrong_arity(out: K.Array[K.f32]):
    nothing(out)  # MARK arity


@K.func
def wants_scalar(x: K.F):
    return x


@K.kernel
def array_for_scalar(out: K.Array[K.f32]):
    out[0] = wants_scalar(out)  # MARK array-for-scalar


@K.kernel
def loop_over_shared_name(out: K.Array[K.f32]):
    s = K.shared(K.f32, 4)
    for s in range(4):  # MARK loop-shadow
        out[s] = K.f32(1)


@K.kernel
def pointless_comparison(out: K.Array[K.u32]):
    """Legal, but NVRTC warns about the unsigned comparison with zero."""
    if K.UNIT_POS >= 0:  # MARK nvrtc-warning
        out[K.UNIT_POS] = K.u32(1)
