"""The training step as Hugging Face's Trainer runs it under TRL's SFTTrainer, with loss_type "nll" or
"chunked_nll", around the same math as models.py: step_bench.py --framework hf-trl [--trl-loss ...],
check_export.py --framework hf-trl [--trl-loss ...].

Our own code, written from these sources (read 2026-12-01):
  [trl]  huggingface/trl v1.9.0 (35def3ee000a), unchanged from v1.6.0 (0dac440542c2) in these parts:
         trl/trainer/sft_trainer.py SFTTrainer.compute_loss, trl/trainer/utils.py entropy_from_logits.
  [trlc] loss_type "chunked_nll", TRL's default since v1.7.0 (b58947c7e, "Default SFT loss to chunked_nll"),
         identical in v1.9.0 and at f2cd57710ae3: trl/trainer/sft_config.py SFTConfig.loss_type;
         trl/trainer/sft_trainer.py _CHUNKED_LM_HEAD_CHUNK_SIZE = 256, _chunk, _chunked_cross_entropy_loss,
         _patch_chunked_ce_lm_head (the model's forward stops at last_hidden_state), and SFTTrainer.compute_loss's
         chunked branch (entropy = entropy_sum / num_valid_tokens, accuracy = num_correct_tokens / num_valid,
         each .item(); no metrics from logits, which the patched forward returns as None).
  [tf]   huggingface/transformers v4.5x, src/transformers/trainer.py at 000945a9b726: Trainer.training_step,
         compute_loss, _prepare_inputs, _inner_training_loop, get_batch_samples;
         src/transformers/loss/loss_utils.py ForCausalLMLoss / fixed_cross_entropy (models.py's loss).
  [acc]  huggingface/accelerate at 16cb6eb80dd9: accelerator.py Accelerator.prepare_model (native AMP wraps
         model.forward in autocast and then in convert_outputs_to_fp32), utils/operations.py convert_to_fp32.

Per optimizer step, what is modelled (time and memory), in the order the Trainer does it:
  1. [tf] _inner_training_loop: get_batch_samples pulls all micro-batches of the step from the data loader,
     which accelerate's DataLoaderShard moves to the device (input_ids, attention_mask, labels), and counts
     num_items_in_batch = sum of (labels != -100) as a device tensor (no host sync).
  2. [tf] per micro-batch, training_step: model.train(); _prepare_inputs (.to(device), a no-op once the
     loader moved them); compute_loss.
  3. [tf] compute_loss -> model(**inputs, num_items_in_batch): the forward under autocast [acc], the loss
     inside the model's forward (ForCausalLMLoss: logits.float(), summed cross-entropy / num_items_in_batch,
     a tensor), then [acc] convert_to_fp32 on the outputs: under bf16/fp16 autocast outputs.logits becomes
     a new fp32 copy of the (B, T, V) logits.
  4. [trl] SFTTrainer.compute_loss, after super().compute_loss(return_outputs=True), on every step
     (loss_type "nll", no Liger): under torch.no_grad, shift_logits = outputs.logits[..., :-1, :] and
     entropy_from_logits(shift_logits): reshape(-1, V) of that slice (a full copy of the logits when the
     micro-batch has more than one sequence: the slice is not contiguous), then per 128 rows log_softmax,
     exp, product, sum; argmax over V; the masked entropy mean and token accuracy, each ended by .item()
     (a host sync, a device sync on CUDA); in train mode attention_mask.sum().item() for num_tokens.
     outputs (and outputs.logits) are released when compute_loss returns, i.e. before backward.
  5. [tf] training_step: no division by the accumulation steps (the model accepts num_items_in_batch, so
     model_accepts_loss_kwargs holds); accelerator.backward(loss) = loss.backward() for fp32 and bf16;
     returns loss.detach().
  6. [tf] _inner_training_loop: logging_nan_inf_filter (default True): torch.isnan(tr_loss_step) or
     torch.isinf(tr_loss_step), two host syncs per micro-batch; tr_loss = tr_loss + tr_loss_step.
  7. [tf] at the step's last micro-batch: accelerator.clip_grad_norm_(params, max_grad_norm) with
     TrainingArguments.max_grad_norm = 1.0 by default (torch.nn.utils.clip_grad_norm_: the total norm
     over every gradient, then every gradient scaled by min(1, max_norm / (norm + 1e-6)); no sync), then
     optimizer.step(), lr_scheduler.step(), model.zero_grad() (set_to_none on PyTorch >= 2.0).

Left out as host bookkeeping of microseconds: self._metrics appends, _total_train_tokens, callbacks
(on_step_begin/end, on_substep_end), current_flos (floating_point_ops), the lr scheduler's float update,
_maybe_log_save_evaluate (its grad_norm.item() and tr_loss gather run only on logging steps), and
compute_loss's `loss *= num_processes` under average_tokens_across_devices (a scalar times 1 on one
device). With
loss_type "chunked_nll" [trlc] steps 3-4 change: the forward ends at the final norm's output; the
shifted hidden states (a copy) are gathered so that the valid targets come first (argsort of the mask,
another copy), and in chunks of 256 rows, each under non-reentrant checkpointing (nothing saved but the
chunk's inputs; recomputed in backward), the fp32 logits h.float() @ w.float().t(), log_softmax, the
summed NLL, the argmax hits and the entropy; the loss is their sum / num_items_in_batch and the metrics
come from the sums. Not modelled: Liger kernels, padding-free/packing, activation offloading, gradient checkpointing, DeepSpeed/FSDP,
fp16's GradScaler (accelerate scales the loss and unscales before clipping; bf16 and fp32 have none).
The attention_mask of a fixed-length batch (all ones) is counted (step 4) but not applied to the
attention, as HF's sdpa path drops an all-ones mask; the loss and gradients stay models.py's.
"""

import contextlib
import math

import torch
import torch.nn.functional as F
import torch.utils.checkpoint

ENTROPY_CHUNK_ROWS = 128  # [trl] entropy_from_logits(logits, chunk_size=128)
MAX_GRAD_NORM = 1.0  # [tf] TrainingArguments.max_grad_norm's default
LOSS_TYPES = ("nll", "chunked_nll")  # [trl] SFTConfig.loss_type ("dft" is another loss, not modelled)
CHUNK_TOKENS = 256  # [trlc] _CHUNKED_LM_HEAD_CHUNK_SIZE


def chunked_entropy(logits, chunk_rows=ENTROPY_CHUNK_ROWS):
    """Entropy (nats) of softmax over the last axis, per leading position: logits (..., V) -> (...).
    Row blocks of chunk_rows bound the temporaries to (chunk_rows, V), as TRL's entropy_from_logits."""
    rows = logits.reshape(-1, logits.shape[-1])  # a copy when `logits` is a non-contiguous slice
    parts = []
    for block in rows.split(chunk_rows, dim=0):
        logp = F.log_softmax(block, dim=-1)
        parts.append(-(logp.exp() * logp).sum(-1))
    return torch.cat(parts).reshape(logits.shape[:-1])


def sft_metrics(logits, targets):
    """SFTTrainer.compute_loss's per-step metrics [trl] -> (mean entropy, mean token accuracy), floats.

    logits (B, T, V) as the model's outputs hold them (fp32 after [acc]); targets (B, T) are accumbench's,
    already shifted (target t is token t+1, -100 = ignored). TRL shifts inside: logits[..., :-1, :] against
    labels[..., 1:], i.e. targets[:, :-1] here, so the last position is left out as in TRL."""
    with torch.no_grad():
        shifted = logits[:, :-1, :]  # (B, T-1, V), a strided view
        labels = targets[:, :-1]  # (B, T-1)
        entropy = chunked_entropy(shifted)  # (B, T-1)
        predicted = shifted.argmax(dim=-1)  # (B, T-1) int64
        counted = labels != -100
        n = counted.sum()
        entropy_sum = (entropy * counted).sum()
        correct = ((predicted == labels) & counted).sum()
        mean_entropy = (entropy_sum / n).item() if n > 0 else 0.0  # each `n > 0` and .item(): a sync
        accuracy = (correct / n).item() if n > 0 else 0.0
    return mean_entropy, accuracy


def _chunk_sums(h, w, labels):
    """[trlc] _chunk: one chunk's summed NLL, correct predictions (fp32) and summed entropy (nats) ->
    three () tensors. h (r, d), w (V, d), labels (r) with -100 on rows that do not count."""
    logits = h.float() @ w.float().t()  # (r, V); under autocast the matmul runs in its dtype
    log_p = F.log_softmax(logits, dim=-1)
    loss = F.nll_loss(log_p, labels, ignore_index=-100, reduction="sum")
    valid = labels != -100
    correct = ((logits.argmax(dim=-1) == labels) & valid).sum().float()
    entropy = (-(log_p.exp() * log_p).sum(dim=-1) * valid).sum()
    return loss, correct, entropy


def chunked_nll(hidden_states, weight, labels=None, shift_labels=None, num_items=None, chunk_tokens=CHUNK_TOKENS):
    """[trlc] _chunked_cross_entropy_loss -> (loss, correct, entropy_sum, valid_count), the loss being the
    summed NLL / num_items (the mean over the valid targets when num_items is None).

    hidden_states (B, T, d), the final norm's output; weight (V, d). `labels` (B, T) are HF's (labels[t]
    is the token at t): hidden[:, :-1] predicts labels[:, 1:], a copy of the shifted hidden states.
    `shift_labels` (B, T) are already aligned (accumbench's targets; TRL's context-parallel path): no shift."""
    if labels is None and shift_labels is None:
        raise ValueError("chunked_nll needs labels or shift_labels")
    width = hidden_states.size(-1)
    if shift_labels is not None:
        hidden, targets = hidden_states.reshape(-1, width), shift_labels.reshape(-1)
    else:
        hidden, targets = hidden_states[..., :-1, :].reshape(-1, width), labels[..., 1:].reshape(-1)
    valid = targets != -100
    valid_count = valid.sum()
    correct = hidden.new_zeros((), dtype=torch.float32)
    entropy_sum = hidden.new_zeros((), dtype=torch.float32)
    if valid_count == 0:  # a host sync, as in TRL; the loss stays connected to every parameter
        loss = (hidden_states.float().sum() + weight.float().sum()) * 0.0
        return loss, correct, entropy_sum, valid_count
    # The valid rows first (a stable argsort of the mask), then whole chunks over them only.
    order = valid.to(torch.int8).argsort(descending=True, stable=True)
    hidden, targets = hidden[order], targets[order]
    rows = (valid_count / chunk_tokens).ceil().to(torch.int64) * chunk_tokens  # a host sync in range()
    loss = hidden.new_zeros((), dtype=torch.float32)
    for start in range(0, rows, chunk_tokens):
        part = torch.utils.checkpoint.checkpoint(_chunk_sums, hidden[start:start + chunk_tokens], weight,
                                                 targets[start:start + chunk_tokens], use_reentrant=False)
        loss, correct, entropy_sum = loss + part[0], correct + part[1], entropy_sum + part[2]
    loss = loss / (valid_count if num_items is None else num_items)
    return loss, correct, entropy_sum, valid_count


def _compute_chunked_loss(model, inputs, model_mask, targets, num_items, autocast, hf_labels):
    """compute_loss with loss_type "chunked_nll" [trlc] -> (loss, entropy, accuracy). The patched forward
    runs the decoder to last_hidden_state (kept in its outputs until it returns) and the chunked loss;
    hf_labels: HF's unshifted labels (the inputs), the shift inside; else accumbench's targets as
    shift_labels (the same math as the plain loss)."""
    region = torch.autocast(inputs.device.type, dtype=autocast) if autocast is not None else contextlib.nullcontext()
    with region:
        hidden_states = model.hidden(inputs, model_mask)
        labels = dict(labels=inputs) if hf_labels else dict(shift_labels=targets)
        loss, correct, entropy_sum, valid = chunked_nll(hidden_states, model.head_weight(), num_items=num_items, **labels)
    entropy = (entropy_sum / valid).item() if valid > 0 else 0.0  # [trlc] each a host sync
    accuracy = (correct / valid).item() if valid > 0 else 0.0
    return loss, entropy, accuracy


def _compute_loss(model, inputs, model_mask, targets, num_items, autocast, loss_type="nll", hf_labels=False):
    """Trainer.compute_loss + SFTTrainer.compute_loss for one micro-batch -> (loss, entropy, accuracy).
    The logits live only inside this function: compute_loss returns the loss alone [tf], so outputs
    are released before training_step calls backward."""
    if loss_type == "chunked_nll":
        return _compute_chunked_loss(model, inputs, model_mask, targets, num_items, autocast, hf_labels)
    if autocast is None:
        logits = model.logits(inputs, model_mask)  # (B, T, V)
        summed = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=-100, reduction="sum")
    else:  # [acc] autocast around model.forward, which computes the loss too (models.summed_loss's ops)
        with torch.autocast(inputs.device.type, dtype=autocast):
            logits = model.logits(inputs, model_mask)
            summed = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=-100,
                                     reduction="sum")
        logits = logits.float()  # [acc] convert_to_fp32 on the outputs: a new fp32 copy replaces them
    loss = summed / num_items  # [tf] fixed_cross_entropy: / num_items_in_batch, a device tensor
    entropy, accuracy = sft_metrics(logits, targets)
    return loss, entropy, accuracy


def training_step(model, batch, num_items, autocast=None, apply_mask=False, divide_by=None, loss_type="nll",
                  hf_labels=False):
    """Trainer.training_step [tf] on one micro-batch (inputs, attention_mask, targets), on the device.
    Returns (loss.detach(), entropy, accuracy, tokens counted from the attention mask).

    apply_mask: pass the attention mask to the model (variable-length exports); a fixed-length batch's
    all-ones mask is only counted. divide_by: a deliberately wrong step that also divides the loss by
    the accumulation steps (what training_step does when the model does not take num_items_in_batch:
    the pre-v4.46 gradient-accumulation bug); exists to show that check_export.py catches it."""
    model.train()
    device = next(model.parameters()).device
    inputs, mask, targets = (t.to(device) for t in batch)  # [tf] _prepare_inputs: a no-op here
    loss, entropy, accuracy = _compute_loss(model, inputs, mask if apply_mask else None, targets, num_items,
                                            autocast, loss_type, hf_labels)
    tokens = mask.sum().item()  # [trl] num_tokens_in_batch in train mode
    if divide_by is not None:
        loss = loss / divide_by
    loss.backward()
    return loss.detach(), entropy, accuracy, tokens


def optimizer_step(model, optimizer, micro_batches, autocast=None, max_grad_norm=MAX_GRAD_NORM, apply_mask=False,
                   wrong_divide=False, before_clip=None, loss_type="nll", hf_labels=False):
    """One optimizer step as _inner_training_loop runs it [tf]: micro_batches is a list of
    (inputs, attention_mask, targets) as the data loader yields them (on the host). Returns
    (tr_loss tensor, [(entropy, accuracy, tokens) per micro-batch]). before_clip(model), when given,
    runs after the last backward and before clipping (check_export.py reads the gradients there);
    optimizer None: no optimizer step (the gradients stay, clipped). loss_type: "nll" or "chunked_nll"
    (TRL's default since v1.7.0); hf_labels: chunked_nll on HF's unshifted labels (TRL's usual path,
    step_bench.py) instead of accumbench's targets (check_export.py: the same math as plain)."""
    device = next(model.parameters()).device
    staged = [tuple(t.to(device) for t in b) for b in micro_batches]  # DataLoaderShard's send_to_device
    num_items = sum((targets != -100).sum() for _, _, targets in staged)  # get_batch_samples
    tr_loss = torch.zeros((), device=device)
    metrics = []
    for batch in staged:
        step_loss, entropy, accuracy, tokens = training_step(
            model, batch, num_items, autocast, apply_mask, len(staged) if wrong_divide else None, loss_type, hf_labels)
        if not (torch.isnan(step_loss) or torch.isinf(step_loss)):  # logging_nan_inf_filter
            tr_loss = tr_loss + step_loss
        metrics.append((entropy, accuracy, tokens))
    if before_clip is not None:
        before_clip(model)
    if max_grad_norm is not None and max_grad_norm > 0:
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.grad is not None], max_grad_norm)
    if optimizer is not None:
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)  # model.zero_grad() on PyTorch >= 2.0 frees them the same way
    return tr_loss, metrics


def plausible_metrics(metrics, vocab_size, rounding=1e-6):
    """Problems with the metrics, as sentences (empty: plausible): finite, entropy in [0, log V]
    (within `rounding`, relative: float32's by default; the CPU's bf16 autocast keeps log_softmax
    and exp in bf16, whose rounding can carry a near-uniform entropy just past log V), accuracy in
    [0, 1]."""
    problems = []
    bound = math.log(vocab_size) * (1 + rounding)
    for i, (entropy, accuracy, _) in enumerate(metrics):
        if not (math.isfinite(entropy) and -rounding * bound <= entropy <= bound):
            problems.append(f"micro-batch {i}: entropy {entropy} outside [0, log V = {math.log(vocab_size):.4f}]")
        if not (math.isfinite(accuracy) and 0.0 <= accuracy <= 1.0):
            problems.append(f"micro-batch {i}: accuracy {accuracy} outside [0, 1]")
    return problems
