"""A mode parameter named llm_mode; a helper method whose mode argument differs from the caller's mode; the mode
inside an f-string, in str() and as a match subject; a static local on a line of several statements."""

import ttnn


class Mixed:
    def __init__(self, mesh_device, args):
        self.args = args
        self.model_config = args.get_model_config()

    def _scale(self, x, llm_mode):
        if llm_mode == "decode":
            return ttnn.mul(x, 2.0)
        return ttnn.mul(x, 4.0)

    def forward(self, x, llm_mode: str):
        tag = f"{llm_mode}_out"
        label = "mode " + str(llm_mode)
        if llm_mode == "decode":
            x = self._scale(x, "prefill")  # decode scales as prefill does, on purpose
        else:
            x = self._scale(x, llm_mode)
        rows = x.shape[-2]; u = "a"; big = rows >= self.model_config["BIG"] if u == "a" else False  # noqa: E702  # fmt: skip
        if big:
            x = ttnn.add(x, 1.0)
        if tag == "decode_out" and label == "mode decode":
            x = ttnn.mul(x, 0.5)
        match llm_mode:
            case "decode":
                x = ttnn.add(x, 0.25)
            case _:
                x = ttnn.add(x, 0.75)
        return x
