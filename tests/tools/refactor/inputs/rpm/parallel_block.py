"""A decoder layer in the Falcon-40B T3000 style: two sub-modules run side by side on the residual stream, each
built with the layer's config dict; the layer's ``set_model_config`` swaps its own dict and forwards the new dict
to both sub-modules' setters (one of which rebuilds its prefill buffer for it). The forward takes ``llm_mode``
and hands it on."""

import ttnn

from rpm.buffered_mlp import TtBufferedMLP
from rpm.mlp import TtPerModeMLP


class TtParallelBlock:
    def __init__(self, mesh_device, state_dict, base_url, layer_num, hidden_size, model_config):
        self.mesh_device = mesh_device
        self.hidden_size = hidden_size
        self.model_config = model_config

        self.mixer = TtPerModeMLP(
            mesh_device=mesh_device,
            state_dict=state_dict,
            base_url=base_url,
            layer_num=layer_num,
            hidden_size=hidden_size,
            model_config=model_config,
        )
        self.mlp = TtBufferedMLP(
            mesh_device=mesh_device,
            state_dict=state_dict,
            base_url=base_url,
            layer_num=layer_num,
            hidden_size=hidden_size,
            model_config=model_config,
        )

    def set_model_config(self, model_config):
        self.model_config = model_config
        self.mixer.set_model_config(model_config)
        self.mlp.set_model_config(model_config)

    def __call__(self, hidden_states, llm_mode):
        if llm_mode == "prefill":
            return self.fwd_prefill(hidden_states=hidden_states, llm_mode=llm_mode)
        elif llm_mode == "decode":
            return self.fwd_decode(hidden_states=hidden_states, llm_mode=llm_mode)
        else:
            assert False  # noqa: B011 - as Falcon-40B writes it (a TTTv1 input)

    def fwd_decode(self, hidden_states, llm_mode):
        residual = ttnn.to_memory_config(hidden_states, self.model_config["OUTPUT_MEMCFG"])
        mixed = self.mixer(hidden_states, llm_mode=llm_mode)
        output = ttnn.add(residual, mixed, memory_config=self.model_config["OUTPUT_MEMCFG"])
        ffn = self.mlp(hidden_states, llm_mode=llm_mode)
        return ttnn.add(output, ffn, memory_config=self.model_config["OUTPUT_MEMCFG"])

    def fwd_prefill(self, hidden_states, llm_mode):
        mixed = self.mixer(hidden_states, llm_mode=llm_mode)
        output = ttnn.add(hidden_states, mixed, memory_config=self.model_config["OUTPUT_MEMCFG"])
        ffn = self.mlp(hidden_states, llm_mode=llm_mode)
        output = ttnn.add(output, ffn, memory_config=self.model_config["OUTPUT_MEMCFG"])
        return ttnn.multiply(output, self.model_config["ACT_SCALE"])
