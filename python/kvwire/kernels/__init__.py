"""Kernels for KV buffers: the block quantisation formats (``quant``: fp8, MXFP4, NVFP4, ..., bit-exact against
the reference dtypes), the engines' KV-cache layouts and conversions between them (``layout``), and the
quantisation report over a real KV tensor (``report``). The public paths are ``kvwire.quant`` and
``kvwire.layout``.

>>> from kvwire.kernels import quant
>>> quant is __import__("kvwire").quant
True
"""
