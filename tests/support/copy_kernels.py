"""Kernels with asynchronous copies (``K.copy_async``, ``K.commit_copies``, ``K.wait_copies``):
a double-buffered block sum that is right, and the same with each step of the handshake left
out, which the interpreter refuses at the offending line."""

from tenferro_host import kernel as K

CUBE = 64
STAGES = 2


@K.kernel
def staged_sums(out: K.Array[K.f32], x: K.Array[K.f32], blocks: K.u32):
    """out[u] = the sum, over ``blocks`` blocks of CUBE * 4 elements of x, of the four after
    unit u's own (its neighbour's): each unit copies its own four of a block into a two-stage
    shared buffer, the next block's copy in flight while the cube sums the current one."""
    s = K.shared(K.f32, STAGES * CUBE * 4)
    u = K.UNIT_POS
    total = K.f32(0)
    K.copy_async(s, u * 4, x, u * 4, 4)
    K.commit_copies()
    for b in range(blocks):
        stage = b % STAGES
        if b + 1 < blocks:  # the next block into the other stage
            nxt = (1 - stage) * K.u32(CUBE * 4) + u * 4
            K.copy_async(s, nxt, x, (b + 1) * K.u32(CUBE * 4) + u * 4, 4)
        K.commit_copies()
        K.wait_copies(1)  # this block's group has landed; the next one may still fly
        K.sync_cube()
        mine = stage * K.u32(CUBE * 4) + ((u + 1) % K.u32(CUBE)) * 4  # the neighbour's four
        total += s[mine] + s[mine + 1] + s[mine + 2] + s[mine + 3]
        K.sync_cube()
    out[u] = total


@K.kernel
def read_before_the_wait(out: K.Array[K.f32], x: K.Array[K.f32]):
    s = K.shared(K.f32, CUBE * 2)
    u = K.UNIT_POS
    K.copy_async(s, u * 2, x, u * 2, 2)
    K.commit_copies()
    out[u] = s[u * 2]  # MARK unwaited


@K.kernel
def waited_without_commit(out: K.Array[K.f32], x: K.Array[K.f32]):
    s = K.shared(K.f32, CUBE)
    u = K.UNIT_POS
    K.copy_async(s, u, x, u, 1)
    K.wait_copies(0)
    out[u] = s[u]  # MARK uncommitted


@K.kernel
def neighbour_without_barrier(out: K.Array[K.f32], x: K.Array[K.f32]):
    s = K.shared(K.f32, CUBE)
    u = K.UNIT_POS
    K.copy_async(s, u, x, u, 1)
    K.commit_copies()
    K.wait_copies(0)
    out[u] = s[(u + 1) % K.u32(CUBE)]  # MARK neighbour


@K.kernel
def overwritten_in_flight(out: K.Array[K.f32], x: K.Array[K.f32]):
    s = K.shared(K.f32, CUBE)
    u = K.UNIT_POS
    K.copy_async(s, u, x, u, 1)
    s[u] = 1.0  # MARK overwrite
    K.commit_copies()
    K.wait_copies(0)
    out[u] = s[u]
