"""Framework bridges: every op a torch operator and a JAX primitive, from its declaration.

``tenferro_host.interop.torch`` registers ops as torch operators (schema from the ``Signature``,
fake kernel from the dtype and shape rules, CPU and CUDA kernels that run the op's variant on
torch's tensors); ``tenferro_host.interop.jax`` exposes them through ``jax.ffi``. Importing this
package imports neither framework; each submodule imports its own.
"""
