"""torchao's NF4Tensor as plain tensors, for torch builds that cannot run the subclass (torch 1.13).

Read from pytorch/ao torchao/dtypes/nf4tensor.py @ 05980129 (what torchtune v0.6.1's FrozenNF4Linear
and LoRALinear(quantize_base=True) hold): to_nf4 defaults block_size 64, scaler_block_size 256;
quantized_data is uint8 (two 4-bit codes a byte, convert_to_norm_float_weight), quantized_scalers int8
(one absmax per 64 weights less their mean, double_quantize_scalers), quantization_factor one per 256
scalers in the weight's dtype, scaler_mean a scalar and nf4 the 16-entry table, both in the weight's
dtype. FSDP2 shards and all-gathers only _INNER_TENSOR_NAMES_FOR_SHARDING (scalers, factors, data);
linear_nf4 (LinearNF4) saves the NF4 weight and dequantizes it (get_original_weight) in forward for
F.linear and again in backward for grad_output @ W.
"""
import torch
import torch.nn.functional as F

BLOCK, SCALER_BLOCK = 64, 256
INNER = ("quantized_scalers", "quantization_factor", "quantized_data")  # _INNER_TENSOR_NAMES_FOR_SHARDING
LUT = [-1.0, -0.6962, -0.5251, -0.3949, -0.2844, -0.1848, -0.0911, 0.0, 0.0796, 0.1609, 0.2461, 0.3379,
       0.4407, 0.5626, 0.7230, 1.0]


class NF4Weight:
    @torch.no_grad()
    def __init__(self, w):
        self.shape, self.dtype = w.shape, w.dtype
        flat = w.reshape(-1)
        assert flat.numel() % (BLOCK * SCALER_BLOCK) == 0, "torchao needs numel % (64 * 256) == 0"
        self.nf4 = torch.tensor(LUT, dtype=w.dtype)
        # double_quantize_scalers
        absmax = flat.view(-1, BLOCK).abs().max(dim=1).values
        self.scaler_mean = absmax.mean()
        centred = (absmax - self.scaler_mean).view(-1, SCALER_BLOCK)
        factor = 256 / (2 * centred.abs().max(dim=1).values)
        self.quantized_scalers = (centred * factor.unsqueeze(-1)).round().clamp(-128, 127).flatten().to(torch.int8)
        self.quantization_factor = factor.contiguous()
        # convert_to_norm_float_weight
        scaled = (flat.view(-1, BLOCK) / absmax.unsqueeze(-1)).flatten()
        codes = (scaled.unsqueeze(-1) - self.nf4).abs().min(dim=-1).indices.to(torch.uint8)
        self.quantized_data = (codes[::2] << 4 | codes[1::2]).to(torch.uint8)

    def numel(self):
        return self.shape[0] * self.shape[1]

    def get_original_weight(self):
        # Step for step torchao's get_original_weight: its locals live until it returns.
        first_elements = (self.quantized_data >> 4).to(torch.long)
        second_elements = (self.quantized_data & 0b1111).to(torch.long)
        dequantized_first = self.nf4[first_elements]
        dequantized_second = self.nf4[second_elements]
        n_scaler_blocks = self.quantized_scalers.numel() // SCALER_BLOCK
        scalers = (self.quantized_scalers.view(n_scaler_blocks, SCALER_BLOCK) /
                   self.quantization_factor.unsqueeze(-1)).flatten().to(self.dtype) + self.scaler_mean
        repeated = scalers.unsqueeze(-1).expand(scalers.size(0), BLOCK // 2)
        scaled_first = dequantized_first * repeated.flatten()
        scaled_second = dequantized_second * repeated.flatten()
        scaled_first = scaled_first.unsqueeze(-1).transpose(0, 1)
        scaled_second = scaled_second.unsqueeze(-1).transpose(0, 1)
        return torch.stack([scaled_first, scaled_second], dim=-1).reshape(self.shape)


class LinearNF4(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight):
        ctx.weight = weight  # ctx.save_for_backward(weight): the NF4 weight, never a 16-bit copy
        return F.linear(x, weight.get_original_weight().to(x.dtype))

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output @ ctx.weight.get_original_weight().to(grad_output.dtype), None


def linear_nf4(x, weight):
    return LinearNF4.apply(x, weight)


def quantize_lora_bases(model, lora_linear):
    """FrozenNF4Linear / LoRALinear(quantize_base=True): to_nf4 of every `lora_linear` module's bf16 base
    (torchtune_cases.py's LoRALinear), whose forward then runs linear_nf4 (modules/peft/lora.py @ v0.6.1)."""
    for mod in model.modules():
        if isinstance(mod, lora_linear):
            mod.nf4_weight = NF4Weight(mod.weight.data)
            del mod._parameters["weight"]
            mod.weight = None

            def forward(x, mod=mod):
                out = linear_nf4(x, mod.nf4_weight)
                if not mod.rank:
                    return out
                return out + mod.scale * mod.lora_b(mod.lora_a(x))

            mod.forward = forward
    return sum(mod.nf4_weight.numel() for mod in model.modules() if getattr(mod, "nf4_weight", None) is not None)
