# ------------------------------------------------------------ CUDA C for every rule kernel

F32, U32, I32, B = (K.ArrayDesc(dtypes.dtype(t), 1) for t in ("float32", "uint32", "int32", "bool"))
RULE_KERNELS = [
    (power, [F32, F32, F32], {}),
    (nan_rules, [B, B, B, B, F32, F32], {}),
    (nan_ignoring, [F32] * 4, {}),
    (remainder, [F32] * 3, {}),
    (to_ints, [U32, I32, F32], {}),
    (rounding_error, [F32] * 3, {}),
    (product_plus, [F32] * 3, {}),
    (if_flag, [I32], {}),
    (range_stop_local, [I32], {}),
    (range_step_local, [I32], {}),
    (below_zero, [I32], {}),
    (constants, [F32], {"eps": 0.0}),
    (count_to, [U32, K.ScalarDesc()], {}),
]


@pytest.mark.parametrize(
    "kern,descs,consts", RULE_KERNELS, ids=[k.name for k, _, _ in RULE_KERNELS]
)
def test_rule_kernels_compile_for_sm90(kern, descs, consts):
    """So a GPU run never meets a kernel of this file that NVRTC rejects."""
    from tenferro_host_cuda_jit.codegen import generate
    from test_cuda_codegen import compile_sm90

    spec = kern.specialize(descs, consts, "cuda", ("sm_90",))
    assert compile_sm90(generate(spec).source) > 0
