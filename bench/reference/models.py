"""PyTorch reference models for the families accumbench models, written from Hugging Face's math.

Each module is our own code; it follows the modeling files of huggingface/transformers as of the
v4.5x releases (Qwen3 arrived in v4.51; tests/data/hf/qwen3.json was written by 4.51.0) and PEFT's
LoRA layer (huggingface/peft, src/peft/tuners/lora/layer.py, Linear.forward; recent releases cast
with _cast_input_dtype, older ones with x.to(lora_A.weight.dtype): the same arithmetic):

  GPT-2    transformers/models/gpt2/modeling_gpt2.py: GPT2Block (pre-LayerNorm), GPT2Attention
           (eager_attention_forward: scores scaled by 1/sqrt(head_dim), softmax), GPT2MLP
           (act = ACT2FN[activation_function], see Activations), learned positions wpe, ln_f, lm_head tied
           to wte. HF's Conv1D stores weights as (in, out) and computes x @ W + b; accumbench (and
           this file) store nn.Linear's (out, in): the same map, transposed storage.
  Llama    transformers/models/llama/modeling_llama.py: LlamaRMSNorm (variance in fp32, the weight
           applied after the cast back), LlamaRotaryEmbedding (inv_freq = 1/theta^(2i/d), the angle
           table concatenated with itself, cos/sin cast to the dtype of its input, the hidden state
           that LlamaModel passes it: under autocast over fp32 weights q·cos promotes to fp32), rotate_half
           (cat(-x2, x1) over the two halves of head_dim), repeat_kv (each kv head expanded to
           n_heads/n_kv_heads consecutive query heads), LlamaMLP (down(act(gate(x)) * up(x)), act =
           ACT2FN[hidden_act], silu by default).
  RoPE scaling  transformers/modeling_rope_utils.py (ROPE_INIT_FUNCTIONS): "linear" divides
           inv_freq by factor; "llama3" keeps wavelengths below original/high_freq_factor, divides
           those above original/low_freq_factor by factor and blends between; "yarn" ramps between
           inv_freq/factor and inv_freq over the correction range of beta_fast..beta_slow rotations
           (floor/ceil unless truncate is false) and multiplies cos/sin by attention_factor;
           "dynamic" is the default up to its original length (accumbench refuses beyond).
  Qwen2    transformers/models/qwen2/modeling_qwen2.py: Llama with bias=True on q/k/v_proj.
  Qwen3    transformers/models/qwen3/modeling_qwen3.py: Qwen3Attention applies q_norm / k_norm
           (an RMSNorm of size head_dim) to each head on the (B, T, H, hd) view, before RoPE.
  Mistral  transformers/models/mistral/modeling_mistral.py: Llama's math (sliding-window attention
           only matters beyond sliding_window positions, far above the shapes checked here).
  Loss     transformers/loss/loss_utils.py ForCausalLMLoss: logits upcast to fp32, cross-entropy
           summed over targets != -100 and divided by num_items_in_batch. accumbench's targets are
           already shifted (target t is token t+1), so no shift happens here.
  Activations  transformers/activations.py ACT2FN (v4.5x): "gelu_new" is NewGELUActivation, which
           computes 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) op by op (autograd saves x, the tanh, 1 + tanh
           and 0.5·x; under CUDA autocast pow runs in fp32, so x is saved as an fp32 copy); "gelu_pytorch_tanh"
           (GELUTanh / PytorchGELUTanh) the same function as one fused op; "gelu" F.gelu; "silu"/"swish"
           nn.SiLU. The plain reference runs gelu_new fused, as accumbench does (the same function);
           CausalLM(..., hf_ops=True), which the hf-trl steps use, runs it op by op as transformers does.
  LoRA     PEFT lora.Linear.forward: result = base(x); x = x.to(lora_A's dtype);
           result = result + lora_B(lora_A(dropout(x))) * scaling; result.to(base result's dtype),
           scaling = lora_alpha / r.

Parameter names are accumbench's (docs/EXPORT.md), so an export loads with load_state_dict.
"""

import math

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

ROPE_CONVENTIONS = ("rotate_half", "interleaved")


class AdaptedLinear(torch.nn.Module):
    """nn.Linear with an optional PEFT-style LoRA adapter (lora_A (r, in), lora_B (out, r))."""

    def __init__(self, n_in, n_out, bias):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(n_out, n_in))
        self.bias = torch.nn.Parameter(torch.zeros(n_out)) if bias else None
        torch.nn.init.normal_(self.weight, std=0.02)
        self.scaling = None
        self.dropout = 0.0

    def add_adapter(self, rank, scaling, dropout):
        self.lora_A = torch.nn.Parameter(torch.empty(rank, self.weight.shape[1]))
        self.lora_B = torch.nn.Parameter(torch.zeros(self.weight.shape[0], rank))
        torch.nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))  # PEFT reset_lora_parameters
        self.scaling = scaling
        self.dropout = dropout

    def forward(self, x):
        result = F.linear(x, self.weight, self.bias)
        if self.scaling is None:
            return result
        a = x.to(self.lora_A.dtype)
        if self.dropout > 0:  # PEFT: nn.Dropout(p), nn.Identity for p = 0
            a = F.dropout(a, self.dropout, self.training)
        return (result + F.linear(F.linear(a, self.lora_A), self.lora_B) * self.scaling).to(result.dtype)


ATTENTIONS = ("eager", "sdpa")


def attention(q, k, v, attention_mask, implementation="eager", divide_scores=False):
    """HF attention: q (B, H, T, hd), k/v (B, Hkv, T, hd), attention_mask (B, T) of 0/1 or None.

    eager (eager_attention_forward): the scores times head_dim ** -0.5 (the Llama family's
    self.scaling; GPT-2's eager attention divides by sqrt(head_dim) instead, divide_scores=True:
    in 16 bits the two round apart unless sqrt(head_dim) is a power of two), masked scores get the
    dtype's lowest value (HF's 4-D causal mask), softmax in fp32. sdpa (sdpa_attention_forward, PyTorch 2.x): is_causal without a padding
    mask, so that the flash kernels run; used only to time GPU steps as a PyTorch job runs them."""
    batch, heads, seq, head_dim = q.shape
    n_rep = heads // k.shape[1]
    if n_rep > 1:  # repeat_kv: (B, Hkv, T, hd) -> (B, Hkv, n_rep, T, hd) -> (B, H, T, hd)
        k = k[:, :, None].expand(batch, k.shape[1], n_rep, seq, head_dim).reshape(batch, heads, seq, head_dim)
        v = v[:, :, None].expand(batch, v.shape[1], n_rep, seq, head_dim).reshape(batch, heads, seq, head_dim)
    if implementation == "sdpa":
        assert attention_mask is None, "sdpa here is for timing unpadded batches"
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    scores = torch.matmul(q, k.transpose(2, 3))  # (B, H, T, T)
    scores = scores / math.sqrt(head_dim) if divide_scores else scores * head_dim ** -0.5
    allowed = torch.ones(seq, seq, dtype=torch.bool, device=q.device).tril()[None, None]  # (1, 1, T, T)
    if attention_mask is not None:
        allowed = allowed & attention_mask.bool()[:, None, None, :]  # keys that are padding
    scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(weights, v)  # (B, H, T, hd)


DEFAULT_ACTIVATION = {"gpt2": "gelu_new", "llama": "silu"}  # for exports written before "activation"


def gelu_new_op_by_op(x):
    """GELU's tanh approximation op by op, in the order of transformers' NewGELUActivation: one
    expression, so that each temporary is freed as soon as it is used, as there."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def mlp_activation(name, hf_ops):
    """The MLP's activation by transformers' name; hf_ops: gelu_new op by op, as transformers runs it."""
    if name == "gelu_new" and hf_ops:
        return gelu_new_op_by_op
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        return lambda x: F.gelu(x, approximate="tanh")
    if name == "gelu":
        return F.gelu
    if name in ("silu", "swish"):
        return F.silu
    raise ValueError(f"activation {name!r} is not one accumbench exports")


class Gpt2Block(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, attn = cfg["d_model"], cfg["n_heads"] * cfg["head_dim"]
        self.n_heads, self.head_dim = cfg["n_heads"], cfg["head_dim"]
        self.ln_1 = torch.nn.LayerNorm(d, eps=cfg["norm_eps"])
        self.c_attn = AdaptedLinear(d, 3 * attn, True)
        self.attn_c_proj = AdaptedLinear(attn, d, True)
        self.ln_2 = torch.nn.LayerNorm(d, eps=cfg["norm_eps"])
        self.c_fc = AdaptedLinear(d, cfg["d_ff"], True)
        self.mlp_c_proj = AdaptedLinear(cfg["d_ff"], d, True)
        self.act = F.gelu  # set by CausalLM


    def forward(self, x, attention_mask, rotary):
        batch, seq, _ = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(self.n_heads * self.head_dim, dim=2)
        heads = lambda t: t.view(batch, seq, self.n_heads, self.head_dim).transpose(1, 2)  # noqa: E731
        y = attention(heads(q), heads(k), heads(v), attention_mask, self.attention, divide_scores=True)
        y = y.transpose(1, 2).reshape(batch, seq, -1)
        h = x + self.attn_c_proj(y)
        return h + self.mlp_c_proj(self.act(self.c_fc(self.ln_2(h))))


class RmsNorm(torch.nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        xf = x.to(torch.float32)
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


class Rotary:
    """cos/sin tables and the rotation; `convention` 'interleaved' rotates the pairs (x0, x1),
    (x2, x3), ... (Meta's original complex-number form, a different layout of the same weights)
    and exists only to show that the cross-check catches a wrong convention."""

    def __init__(self, head_dim, theta, convention="rotate_half", scaling=None):
        assert convention in ROPE_CONVENTIONS, convention
        self.head_dim, self.theta, self.convention, self.scaling = head_dim, theta, convention, scaling

    def inverse_frequencies(self):
        dim, base = self.head_dim, self.theta
        exponents = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
        inv_freq = 1.0 / (base ** exponents)
        s = self.scaling
        kind = s["rope_type"] if s else "default"
        if kind in ("default", "dynamic"):
            return inv_freq, 1.0
        if kind == "linear":
            return inv_freq / s["factor"], 1.0
        if kind == "llama3":
            factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
            original = s["original_max_position_embeddings"]
            wavelen = 2 * math.pi / inv_freq
            scaled = torch.where(wavelen > original / low, inv_freq / factor, inv_freq)
            smooth = (original / wavelen - low) / (high - low)
            smoothed = (1 - smooth) * scaled / factor + smooth * scaled
            medium = ~(wavelen < original / high) * ~(wavelen > original / low)
            return torch.where(medium, smoothed, scaled), 1.0
        if kind == "yarn":
            factor, original = s["factor"], s["original_max_position_embeddings"]

            def correction_dim(rotations):
                return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

            low, high = correction_dim(s["beta_fast"]), correction_dim(s["beta_slow"])
            if s["truncate"]:
                low, high = math.floor(low), math.ceil(high)
            low, high = max(low, 0), min(high, dim - 1)
            if low == high:
                high += 0.001
            ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
            extrapolation = 1 - ramp
            pos_freqs = base ** exponents
            inv = (1.0 / (factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation
            return inv, s["attention_factor"]
        raise ValueError(f"rope_type {kind!r} is not one the reference computes")

    def apply(self, x, table_dtype):  # x: (B, H, T, hd); table_dtype: the hidden state's
        seq = x.shape[2]
        inv_freq, attention_factor = self.inverse_frequencies()
        freqs = torch.outer(torch.arange(seq, dtype=torch.float32), inv_freq)  # (T, hd/2)
        if self.convention == "interleaved":
            angles = freqs.repeat_interleave(2, dim=-1)  # (T, hd): f0 f0 f1 f1 ...
            pairs = x.reshape(*x.shape[:-1], -1, 2)
            rotated = torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)
        else:
            angles = torch.cat((freqs, freqs), dim=-1)  # (T, hd): f0 f1 ... f0 f1 ...
            half = x.shape[-1] // 2
            rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)  # rotate_half
        cos, sin = angles.cos() * attention_factor, angles.sin() * attention_factor
        cos, sin = cos.to(x.device, table_dtype), sin.to(x.device, table_dtype)
        return x * cos + rotated * sin


class LlamaBlock(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, hd = cfg["d_model"], cfg["head_dim"]
        self.n_heads, self.n_kv_heads, self.head_dim = cfg["n_heads"], cfg["n_kv_heads"], hd
        self.input_layernorm = RmsNorm(d, cfg["norm_eps"])
        self.q_proj = AdaptedLinear(d, self.n_heads * hd, cfg["qkv_bias"])
        self.k_proj = AdaptedLinear(d, self.n_kv_heads * hd, cfg["qkv_bias"])
        self.v_proj = AdaptedLinear(d, self.n_kv_heads * hd, cfg["qkv_bias"])
        self.q_norm = RmsNorm(hd, cfg["norm_eps"]) if cfg["qk_norm"] else None
        self.k_norm = RmsNorm(hd, cfg["norm_eps"]) if cfg["qk_norm"] else None
        # attention_bias (Llama, Qwen3) and Llama's mlp_bias; exports before them have neither.
        self.o_proj = AdaptedLinear(self.n_heads * hd, d, cfg.get("o_bias", False))
        self.post_attention_layernorm = RmsNorm(d, cfg["norm_eps"])
        mlp_bias = cfg.get("mlp_bias", False)
        self.gate_proj = AdaptedLinear(d, cfg["d_ff"], mlp_bias)
        self.up_proj = AdaptedLinear(d, cfg["d_ff"], mlp_bias)
        self.down_proj = AdaptedLinear(cfg["d_ff"], d, mlp_bias)
        self.act = F.silu  # set by CausalLM


    def forward(self, x, attention_mask, rotary):
        batch, seq, _ = x.shape
        normed = self.input_layernorm(x)
        q = self.q_proj(normed).view(batch, seq, self.n_heads, self.head_dim)
        k = self.k_proj(normed).view(batch, seq, self.n_kv_heads, self.head_dim)
        v = self.v_proj(normed).view(batch, seq, self.n_kv_heads, self.head_dim).transpose(1, 2)
        if self.q_norm is not None:  # Qwen3: per head, on (B, T, H, hd), before RoPE
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = rotary.apply(q.transpose(1, 2), x.dtype), rotary.apply(k.transpose(1, 2), x.dtype)
        y = attention(q, k, v, attention_mask, self.attention).transpose(1, 2).reshape(batch, seq, -1)
        h = x + self.o_proj(y)
        m = self.post_attention_layernorm(h)
        return h + self.down_proj(self.act(self.gate_proj(m)) * self.up_proj(m))


class CausalLM(torch.nn.Module):
    """GPT-2 or the Llama family, from accumbench's model config (index.json's "model")."""

    def __init__(self, cfg, rope="rotate_half", attention="eager", hf_ops=False):
        super().__init__()
        assert attention in ATTENTIONS, attention
        self.cfg = cfg
        self.gpt2 = cfg["arch"] == "gpt2"
        if self.gpt2:
            self.wte = torch.nn.Embedding(cfg["vocab_size"], cfg["d_model"])
            self.wpe = torch.nn.Embedding(cfg["max_seq_len"], cfg["d_model"])
            self.blocks = [Gpt2Block(cfg) for _ in range(cfg["n_layers"])]
            self.ln_f = torch.nn.LayerNorm(cfg["d_model"], eps=cfg["norm_eps"])
            prefix, self.rotary = "h", None
        else:
            self.embed_tokens = torch.nn.Embedding(cfg["vocab_size"], cfg["d_model"])
            self.blocks = [LlamaBlock(cfg) for _ in range(cfg["n_layers"])]
            self.norm = RmsNorm(cfg["d_model"], cfg["norm_eps"])
            prefix, self.rotary = "layers", Rotary(cfg["head_dim"], cfg["rope_theta"], rope, cfg.get("rope_scaling"))
        act = mlp_activation(cfg.get("activation", DEFAULT_ACTIVATION[cfg["arch"]]), hf_ops)
        for i, block in enumerate(self.blocks):
            block.attention = attention
            block.act = act
            self.add_module(f"{prefix}{i}", block)
        if not cfg["tied_embeddings"]:
            self.lm_head = torch.nn.Linear(cfg["d_model"], cfg["vocab_size"], bias=False)
        self.checkpointing = False

    def add_lora(self, rank, scaling, dropout, paths=None):
        """Adapters on the block linears at `paths` (module names such as 'layers0.q_proj'; None:
        every block linear, PEFT's "all-linear"); freezes every other parameter, as PEFT does."""
        for p in self.parameters():
            p.requires_grad_(False)
        for name, module in self.named_modules():
            if isinstance(module, AdaptedLinear) and (paths is None or name in paths):
                module.add_adapter(rank, scaling, dropout)

    def head_weight(self):  # (V, d): the output projection's weight, the embedding's when tied
        if not self.cfg["tied_embeddings"]:
            return self.lm_head.weight
        return self.wte.weight if self.gpt2 else self.embed_tokens.weight

    def hidden(self, inputs, attention_mask=None):  # inputs (B, T) int64 -> (B, T, d), the final norm's output
        if self.gpt2:
            positions = torch.arange(inputs.shape[1], device=inputs.device)
            x = self.wte(inputs) + self.wpe(positions)
        else:
            x = self.embed_tokens(inputs)
        for block in self.blocks:
            if self.checkpointing and torch.is_grad_enabled():  # Trainer's gradient_checkpointing: the block's
                x = checkpoint(block, x, attention_mask, self.rotary, use_reentrant=False)  # input kept, rerun in backward
            else:
                x = block(x, attention_mask, self.rotary)
        return self.ln_f(x) if self.gpt2 else self.norm(x)

    def logits(self, inputs, attention_mask=None):  # inputs (B, T) int64 -> (B, T, V)
        return F.linear(self.hidden(inputs, attention_mask), self.head_weight())

    def summed_loss(self, inputs, targets, attention_mask=None):
        """ForCausalLMLoss with num_items_in_batch: the caller divides by the step's targets."""
        logits = self.logits(inputs, attention_mask).float()
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100, reduction="sum")
