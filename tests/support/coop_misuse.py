"""Kernels that misuse cooperation; the interpreter must locate each mistake (the tests find the
line by the marker comment ending it)."""

from support import coop_remote
from tenferro_host import kernel as K


@K.kernel
def barrier_in_branch(out: K.Array[K.f32]):
    s = K.shared(K.f32, 64)
    u = K.UNIT_POS
    s[u] = K.f32(1)
    if u < 16:
        K.sync_cube()  # MARK divergent
    out[K.ABSOLUTE_POS] = s[u]


@K.kernel
def barrier_after_return(out: K.Array[K.f32]):
    u = K.UNIT_POS
    if u >= 8:
        return
    K.sync_cube()  # MARK returned
    out[K.ABSOLUTE_POS] = K.f32(1)


@K.kernel
def barrier_in_cube_uniform_branches(out: K.Array[K.u32]):
    """Legal: the branch and the loop's trip count are uniform within each cube."""
    s = K.shared(K.u32, 64)
    u = K.UNIT_POS
    s[u] = u
    if K.CUBE_POS == 0:
        K.sync_cube()
        v = s[(u + 1) % 64]
        K.sync_cube()
        s[u] = v
    for t in range(K.CUBE_POS):
        K.sync_cube()
        s[u] = t
    out[K.ABSOLUTE_POS] = s[u]


@K.kernel
def read_before_barrier(out: K.Array[K.f32]):
    s = K.shared(K.f32, 64)
    u = K.UNIT_POS
    s[u] = K.f32(u)
    out[K.ABSOLUTE_POS] = s[(u + 1) % 64]  # MARK read-race


@K.kernel
def write_after_read(out: K.Array[K.f32]):
    s = K.shared(K.f32, 64)
    u = K.UNIT_POS
    s[u] = K.f32(u)
    K.sync_cube()
    v = s[(u + 1) % 64]
    s[u] = v  # MARK write-race
    out[K.ABSOLUTE_POS] = v


@K.kernel
def same_element_writes(out: K.Array[K.f32]):
    s = K.shared(K.f32, 1)
    s[0] = K.f32(K.UNIT_POS)  # MARK write-write
    K.sync_cube()
    out[K.ABSOLUTE_POS] = s[0]


@K.kernel
def plain_read_of_atomics(out: K.Array[K.u32]):
    s = K.shared(K.u32, 1)
    if K.UNIT_POS == 0:
        s[0] = K.u32(0)
    K.sync_cube()
    K.atomic_add(s, 0, 1)
    out[K.ABSOLUTE_POS] = s[0]  # MARK atomic-race


@K.kernel
def unwritten_read(out: K.Array[K.f32]):
    s = K.shared(K.f32, 64)
    u = K.UNIT_POS
    if u < 32:
        s[u] = K.f32(1)
    K.sync_cube()
    out[K.ABSOLUTE_POS] = s[u]  # MARK unwritten


@K.kernel
def unwritten_atomic(out: K.Array[K.u32]):
    s = K.shared(K.u32, 4)
    out[K.ABSOLUTE_POS] = K.atomic_add(s, K.UNIT_POS % 4, 1)  # MARK unwritten-atomic


@K.kernel
def barrier_in_remote_function(out: K.Array[K.f32]):
    s = K.shared(K.f32, 64)
    u = K.UNIT_POS
    s[u] = K.f32(1)
    K.sync_cube()
    if u < 32:
        coop_remote.halve_then_sync(s, u)
    out[K.ABSOLUTE_POS] = K.f32(0)
