"""Gradient compression, as Horovod's horovod.tensorflow.compression."""

import tensorflow as tf

from edt.common.compression import Compressor, NoneCompressor  # noqa: F401


class FP16Compressor(Compressor):
    """Floating-point tensors travel as float16 and come back in their type."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating:
            return tf.cast(tensor, tf.float16), tensor.dtype
        return tensor, tensor.dtype

    @staticmethod
    def decompress(tensor, ctx):
        return tf.cast(tensor, ctx) if ctx.is_floating else tensor


class Compression:
    none = NoneCompressor
    fp16 = FP16Compressor
