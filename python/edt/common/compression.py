"""What Horovod's gradient compression is, whatever the framework: a
Compressor compresses a tensor before communication and restores it after
(edt.torch.compression and edt.tensorflow.compression add float16)."""


class Compressor:
    """Compresses a tensor before communication and restores it after."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor
