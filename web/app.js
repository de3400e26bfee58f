// memscale web calculator: the controls become a run document (docs/run-json.md), the
// WebAssembly module (memscale_web.cpp) answers it with memscale-plan's --json report, and
// this script draws that report. It computes no figure itself: every number shown is read
// from the report, and each carries its report path (data-path) and value (data-value), so
// web/browser_test.py can compare the page with memscale-plan.
'use strict';

const GIB = 1073741824;
const MIB = 1048576;
const COMPONENTS = [
  ['parameters', 'parameters', '#4e79a7'],
  ['gradients', 'gradients', '#f28e2b'],
  ['optimizer', 'optimizer state', '#e15759'],
  ['activations', 'activations', '#76b7b2'],
  ['workspace', 'workspace', '#59a14f'],
];
// generate()'s breakdown (the inference report's prefill, decode and peak).
const INFERENCE_COMPONENTS = [
  ['weights', 'weights', '#4e79a7'],
  ['kv_cache', 'KV cache', '#f28e2b'],
  ['activations', 'activations', '#76b7b2'],
  ['logits', 'logits', '#e15759'],
  ['workspace', 'workspace', '#59a14f'],
];
const MODE_COLORS = {none: '#6b6b6b', conservative: '#4e79a7', balanced: '#59a14f', aggressive: '#e15759'};
const CONFIG = '__config';
const CUSTOM_GPU = '__custom';

const $ = (id) => document.getElementById(id);
const state = {config: null, report: '', runText: '', urls: [], gpus: [], vision: new Set(), downloadTimer: 0};
// Milliseconds from a control's event to the redrawn page (layout included), one entry per
// answer; the browser test reads them.
window.memscaleTimings = [];

// ---------------------------------------------------------------------------------------
// The module: a string in, a JSON string out (memscale_web.cpp).
function callWasm(name, text) {
  const size = Module.lengthBytesUTF8(text) + 1;
  const ptr = Module._malloc(size);
  try {
    Module.stringToUTF8(text, ptr, size);
    return JSON.parse(Module.UTF8ToString(Module['_' + name](ptr)));
  } finally {
    Module._free(ptr);
  }
}

// ---------------------------------------------------------------------------------------
// Text helpers.
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'})[c]);
const gib = (b) => (b / GIB).toFixed(2) + ' GiB';
const count = (n) => n.toLocaleString('en-US');
const percent = (x) => (x >= 0 ? '+' : '') + (x * 100).toFixed(1) + '%';
// A figure of the report: its path, its value as JSON, and how it is shown.
function fig(path, value, text) {
  return `<span class="fig" data-path="${esc(path)}" data-value="${esc(JSON.stringify(value))}">${esc(text)}</span>`;
}
const bytesFig = (path, v) => fig(path, v, gib(v));
const countFig = (path, v) => fig(path, v, count(v));
const generating = () => $('task').value === 'generate';
// A torchvision or timm model (the catalog's vision_models): a vision run document.
const visionModel = () => state.vision.has($('model').value);
const textFig = (path, v) => fig(path, v, v);

// ---------------------------------------------------------------------------------------
// The run document of the controls.
function modelDescription() {
  const name = $('model').value;
  if (name !== CONFIG) return name;
  return {hf_config: state.config};
}

// generate() as a run document: {"model", "infer", ...} (docs/run-json.md).
function inferenceDocument() {
  const cache = $('kv-cache').value;
  const infer = {
    batch: Number($('batch').value),
    context: Number($('context').value),
    new_tokens: Number($('new-tokens').value),
    weights: $('weights').value,
    kv_cache: cache,
    attention: $('gen-attention').value,
  };
  const gptFast = $('gen-loop').value === 'gpt-fast';
  // gpt-fast's cache is static (model.py KVCache): the reader sets it.
  if (gptFast) delete infer.kv_cache;
  if (infer.weights === 'gptfast-int4') infer.group_size = Number($('group-size').value);
  if (cache === 'quantized' && !gptFast) infer.kv_dtype = $('kv-bits').value;
  else if ($('kv-dtype').value !== '') infer.kv_dtype = $('kv-dtype').value;
  const doc = {model: modelDescription(), infer: infer};
  if (gptFast) doc.framework = 'gpt-fast';
  const software = softwareStack(['transformers', 'torch', 'cuda']);  // generate() reads no bitsandbytes release
  if (software) doc.software = software;
  addGpu(doc);
  return doc;
}

// The GPU, and the allocator settings and measured context every kind of run document takes.
function addGpu(doc) {
  const gpu = $('gpu').value;
  if (gpu === CUSTOM_GPU) doc.gpu = {memory: Math.round(Number($('gpu-memory').value) * GIB), bf16: true};
  else if (gpu !== '') doc.gpu = gpu;
  if (gpu !== '') doc.headroom = Number($('headroom').value);
  const conf = $('alloc-conf').value.trim();
  if (conf !== '') doc.alloc_conf = conf;
  const context = $('context-memory').value.trim();
  if (context !== '') doc.context_memory = Math.round(Number(context) * MIB);
}

// A vision model's run document: the shared training settings, the image and its memory format (docs/run-json.md).
function visionDocument() {
  const image = $('image').value.trim();
  const run = {
    micro_batch: Number($('batch').value),
    grad_accum: Number($('grad-accum').value),
    precision: $('precision').value,
    optimizer: $('optimizer').value,
    optimizer_impl: $('optimizer-impl').value,
    checkpointing: $('checkpointing').value,
    image: /^[0-9]+$/.test(image) ? Number(image) : image,  // N, or "HxW" as typed (the library checks it)
  };
  if ($('paged-optimizer').checked) run.paged_optimizer = true;
  if ($('channels-last').checked) run.channels_last = true;
  const doc = {model: $('model').value, run: run};
  const software = softwareStack(['torch', 'bitsandbytes', 'cuda']);  // a vision step runs no transformers code
  if (software) doc.software = software;
  addGpu(doc);
  return doc;
}

function runDocument() {
  if (generating()) return inferenceDocument();
  if (visionModel()) return visionDocument();
  const target = $('target').value;
  const run = {
    micro_batch: Number($('batch').value),
    seq_len: Number($('seq').value),
    grad_accum: Number($('grad-accum').value),
    precision: $('precision').value,
    optimizer: $('optimizer').value,
    optimizer_impl: $('optimizer-impl').value,
    checkpointing: $('checkpointing').value,
    attention: $('attention').value,
    target: target,
    dropout: $('dropout').checked,
  };
  if ($('paged-optimizer').checked) run.paged_optimizer = true;
  if (target !== 'full') {
    run.lora_rank = Number($('lora-rank').value);
    run.lora_targets = $('lora-targets').value;
  }
  if (target === 'qlora') run.quant = $('double-quant').checked ? 'nf4_double_quant' : 'nf4';
  const framework = $('framework').value;
  addKernelsAndBatches(run, framework);
  const doc = {model: modelDescription(), framework: framework, run: run};
  const software = softwareStack();
  if (software) doc.software = software;
  addGpu(doc);
  return doc;
}

// The "Kernels and batches" fields and torchtitan's and torchtune's own, each written only when it is not
// the document's default, so that a page left at its defaults writes the run.json it always did.
function addKernelsAndBatches(run, framework) {
  if (framework === 'torchtitan') {  // its FSDP2 ranks are not optional (> 1)
    run.data_parallel = Number($('data-parallel').value);
    const sac = $('sac-policy').value;
    if (sac === 'layer') run.sac_policy = 'layer:' + $('sac-every').value;
    else if (sac !== 'none') run.sac_policy = sac;
  }
  // torchtune: one GPU runs the single-device recipe; more run full_finetune_distributed (FSDP2).
  if (framework === 'torchtune' && Number($('tune-ranks').value) > 1) run.data_parallel = Number($('tune-ranks').value);
  // torch.utils.checkpoint's variant: Hugging Face passes one by release; the others are always non-reentrant.
  if (!$('reentrant-box').hidden && $('use-reentrant').value !== '') run.use_reentrant = $('use-reentrant').value === 'true';
  if ($('liger').checked) run.liger = true;
  const packing = $('packing').value;
  if (packing !== 'none') run.packing = packing;
  if (packing === 'padding_free' && $('example-tokens').value !== '') run.example_tokens = Number($('example-tokens').value);
  if ($('padded').checked) run.padded = true;
}

// The run document's "software": the versions typed of `names`, as typed (the library reads and checks them).
function softwareStack(names = ['transformers', 'torch', 'bitsandbytes', 'cuda']) {
  const stack = {};
  for (const name of names) {
    const version = $('sw-' + name).value.trim();
    if (version !== '') stack[name] = version;
  }
  return Object.keys(stack).length ? stack : null;
}

// ---------------------------------------------------------------------------------------
// Drawing, on canvases: no DOM to build or lay out when a slider moves.
const FONT = '11px system-ui, sans-serif';

// The 2D context of canvas #id, sized `width` x `height` CSS pixels and cleared.
function canvas(id, width, height) {
  const c = $(id);
  const dpr = window.devicePixelRatio || 1;
  if (c.width !== Math.round(width * dpr) || c.height !== Math.round(height * dpr)) {
    c.width = Math.round(width * dpr);
    c.height = Math.round(height * dpr);
    c.style.aspectRatio = `${width} / ${height}`;
  }
  const g = c.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, width, height);
  g.font = FONT;
  g.textBaseline = 'middle';
  return g;
}

function line(g, x0, y0, x1, y1, color, width, dash) {
  g.save();
  g.strokeStyle = color;
  g.lineWidth = width;
  g.setLineDash(dash || []);
  g.beginPath();
  g.moveTo(x0, y0);
  g.lineTo(x1, y1);
  g.stroke();
  g.restore();
}

function label(g, text, x, y, color, align) {
  g.fillStyle = color || '#222';
  g.textAlign = align || 'left';
  g.fillText(text, x, y);
}

// One horizontal stacked bar per row: the five components, then the rest up to `peak`.
function stackedBars(id, rows, plan, restLabel, components) {
  components = components || COMPONENTS;
  const marked = rows.some((r) => r.marks);
  const width = 760, left = 110, right = 16, rowHeight = 30, top = marked ? 46 : 22;
  const height = top + rows.length * rowHeight + 26;
  const g = canvas(id, width, height);
  const vram = plan ? plan.vram : 0;
  const scaleMax = Math.max(vram, ...rows.map((r) => r.peak)) * 1.02;
  const x = (b) => left + (b / scaleMax) * (width - left - right);
  rows.forEach((r, i) => {
    const y = top + i * rowHeight;
    let at = 0;
    for (const [key, , color] of components) {
      const v = r.breakdown[key];
      g.fillStyle = color;
      if (v > 0) g.fillRect(x(at), y, x(at + v) - x(at), rowHeight - 8);
      at += v;
    }
    g.fillStyle = '#d9d4cf';
    if (r.peak > at) g.fillRect(x(at), y, x(r.peak) - x(at), rowHeight - 8);
    (r.marks || []).forEach((m, k) => {  // staggered, so that close values stay readable
      const ty = y - 8 - 11 * (r.marks.length - 1 - k);
      line(g, x(m.value), ty, x(m.value), y + rowHeight - 5, '#222', 1);
      label(g, m.label, x(m.value) - 3, ty, '#222', 'right');
    });
    label(g, r.label, left - 8, y + (rowHeight - 8) / 2, '#222', 'right');
  });
  const bottom = top + rows.length * rowHeight;
  if (plan) {
    line(g, x(vram), 2, x(vram), bottom, '#c0392b', 2);
    label(g, 'VRAM ' + gib(vram), x(vram) - 3, 8, '#c0392b', 'right');
    line(g, x(plan.budget), 2, x(plan.budget), bottom, '#e67e22', 2, [5, 4]);
    label(g, 'budget', x(plan.budget) - 3, 20, '#e67e22', 'right');
  }
  let lx = left;
  for (const [, name, color] of [...components, ['', restLabel, '#d9d4cf']]) {
    g.fillStyle = color;
    g.fillRect(lx, bottom + 8, 10, 10);
    label(g, name, lx + 14, bottom + 13);
    lx += 14 + g.measureText(name).width + 14;
  }
}

// Peak against micro-batch per mode (log2 x axis), capped at twice the VRAM.
// The canvas carries the figures drawn (data-cliff), which web/browser_test.py compares with memscale-plan's.
function cliffChart(id, cliff, plan, microBatch) {
  $(id).dataset.cliff = JSON.stringify(cliff);
  const width = 760, height = 260, left = 56, right = 110, top = 12, bottom = 34;
  const g = canvas(id, width, height);
  const vram = plan.vram;
  const batches = cliff.micro_batch;
  const cap = 2 * vram;  // the cliff, not the far end of the curve (as memscale-plan --svg-batch)
  let yMax = vram;
  for (const mode of Object.keys(cliff.peak)) for (const v of cliff.peak[mode]) yMax = Math.max(yMax, Math.min(v, cap));
  yMax *= 1.05;
  const xMax = Math.log2(batches[batches.length - 1]) || 1;
  const x = (b) => left + (Math.log2(b) / xMax) * (width - left - right);
  const y = (v) => top + (1 - v / yMax) * (height - top - bottom);
  line(g, left, height - bottom, width - right, height - bottom, '#999', 1);
  for (const b of batches) label(g, String(b), x(b), height - bottom + 10, '#666', 'center');
  label(g, 'micro-batch', (left + width - right) / 2, height - 6, '#222', 'center');
  const span = yMax / GIB / 5;
  const unit = Math.pow(10, Math.floor(Math.log10(span)));
  const step = [1, 2, 5, 10].map((f) => f * unit).find((v) => v >= span) * GIB;
  for (let v = 0; v <= yMax; v += step) {
    line(g, left - 3, y(v), left, y(v), '#999', 1);
    label(g, String(Math.round(v / GIB * 100) / 100), left - 6, y(v), '#666', 'right');
  }
  label(g, 'GiB', 8, top + 4);
  line(g, left, y(vram), width - right, y(vram), '#c0392b', 1.5);
  label(g, 'VRAM', width - right + 4, y(vram), '#c0392b');
  line(g, left, y(plan.budget), width - right, y(plan.budget), '#e67e22', 1.5, [5, 4]);
  label(g, 'budget', width - right + 4, y(plan.budget), '#e67e22');
  line(g, x(microBatch), top, x(microBatch), height - bottom, '#222', 1, [2, 3]);
  label(g, 'this run', x(microBatch) + 3, top + 4);
  let ly = top + 40;
  for (const [mode, values] of Object.entries(cliff.peak)) {
    const color = MODE_COLORS[mode] || '#000';
    g.save();
    g.beginPath();
    g.rect(left, top - 4, width - right - left + 4, height - bottom - top + 4);
    g.clip();
    g.strokeStyle = color;
    g.fillStyle = color;
    g.lineWidth = 2;
    g.beginPath();
    batches.forEach((b, i) => (i === 0 ? g.moveTo(x(b), y(values[i])) : g.lineTo(x(b), y(values[i]))));
    g.stroke();
    batches.forEach((b, i) => {
      g.beginPath();
      g.arc(x(b), y(values[i]), 2.5, 0, 2 * Math.PI);
      g.fill();
    });
    g.restore();
    label(g, mode, width - right + 4, ly, color);
    ly += 14;
  }
}

// ---------------------------------------------------------------------------------------
// The report on the page.
function renderVerdict(r) {
  if (!r.plan && r.gpu) {  // torchtitan, torchtune over several GPUs: memscale-plan's report has no plan for them
    let html = `<p class="chosen">No plan: ${textFig('framework.name', r.framework.name)}'s run is its own FSDP2 layout and ` +
               'checkpointing policy, not the planner\'s modes (checkpointing, offload). The figures are one GPU\'s step.</p>';
    if (r.allocator && r.allocator.verdict)
      html += `<p>At the budget: <b class="v-${esc(r.allocator.verdict)}">${textFig('allocator.verdict', r.allocator.verdict)}</b></p>`;
    return html;
  }
  if (!r.plan) return '<p>Pick a GPU to get a plan: which mode fits it, with what headroom.</p>';
  const p = r.plan;
  const chosen = p.modes.findIndex((m) => m.mode === p.mode);
  let html = `<p class="chosen">Chosen: <b>${p.mode === null ? fig('plan.mode', null, 'nothing') : textFig('plan.mode', p.mode)}</b>` +
             ` — ${textFig('plan.reason', p.reason)} <small>[${textFig('plan.status', p.status)}]</small></p>`;
  html += `<p>Verdict: <b class="v-${esc(p.verdict)}">${textFig('plan.verdict', p.verdict)}</b>`;
  // With the cheaper levers the answer is CONSERVATIVE plus the levers: their own plan.
  const levers = p.status === 'cheaper_levers';
  if (chosen >= 0) {
    const m = levers ? p.lever_plan : p.modes[chosen];
    const at = levers ? 'plan.lever_plan' : `plan.modes.${chosen}`;
    html += ` — peak ${bytesFig(at + '.peak', m.peak)}, between ${bytesFig(at + '.peak_range.low', m.peak_range.low)} and ` +
            `${bytesFig(at + '.peak_range.high', m.peak_range.high)} (error band ${fig(at + '.band.low', m.band.low, percent(m.band.low))} .. ` +
            `${fig(at + '.band.high', m.band.high, percent(m.band.high))}, ${textFig(at + '.band.class', m.band.class)}, ${textFig(at + '.band.quantity', m.band.quantity)})` +
            ` against a budget of ${bytesFig('plan.budget', p.budget)}`;
  }
  html += '</p>';
  if (p.changes) html += `<p>Changes: ${textFig('plan.changes', p.changes)}</p>`;
  html += `<p>Largest micro-batch in any mode: ${countFig('plan.max_micro_batch', p.max_micro_batch)}` +
          ` (${textFig('plan.max_micro_batch_mode', p.max_micro_batch_mode)}); memory pressure ` +
          `${fig('plan.pressure', p.pressure, p.pressure.toFixed(2))}</p>`;
  return html;
}

function renderPeaks(r) {
  const row = (label, at, peak) =>
    `<tr><th>${label}</th><td>${bytesFig(at + '.tensor', peak.tensor)}</td><td>${bytesFig(at + '.reserved', peak.reserved)}</td>` +
    `<td>${bytesFig(at + '.device', peak.device)}</td><td>${textFig(at + '.phase', peak.phase)}</td></tr>`;
  return '<tr><th></th><th>allocated<br><small>max_memory_allocated</small></th><th>reserved<br><small>max_memory_reserved</small></th>' +
         '<th>device<br><small>nvidia-smi</small></th><th>at</th></tr>' +
         row('steady state', 'peak', r.peak) + row('step 1', 'first_step.peak', r.first_step.peak) +
         `<tr><th>parameters</th><td colspan="4">${countFig('parameters', r.parameters)} (trainable ` +
         `${countFig('trainable_parameters', r.trainable_parameters)})</td></tr>` +
         // bitsandbytes' paged state: CUDA unified memory, in none of the peaks above.
         ((r.static || {}).paged_optimizer ? `<tr><th>paged state</th><td colspan="4">${bytesFig('static.paged_optimizer', r.static.paged_optimizer)} ` +
                                     'in unified memory (outside the allocator: in no peak above)</td></tr>' : '') +
         // What the offloads hold on the host (estimate/host_bytes.hpp), in none of the peaks above.
         ((r.static || {}).host_memory ? `<tr><th>host memory</th><td colspan="4">${bytesFig('static.host_memory', r.static.host_memory)} ` +
                                  'held by the offloads (in no peak above)</td></tr>' : '');
}

// The software the estimate assumes, and the caching allocator's replay of the step: what
// memscale-plan prints under "caching allocator" (docs/allocator.md).
function renderAllocator(r) {
  const stack = Object.keys(r.software || {}).map((k) => `${esc(k)} ${textFig('software.' + k, r.software[k])}`);
  if (r.architecture) return renderVisionModel(r, stack) + allocatorText(r.allocator);
  const fw = r.framework || {name: 'hf'};
  let html = `<p>Framework: ${textFig('framework.name', fw.name)}` +
             (fw.version ? ` ${textFig('framework.version', fw.version)}` : '') +
             ' <small>(<code>--framework</code> or the run\'s <code>framework</code>)</small>; ';
  html += `software assumed: ${stack.length ? stack.join(', ') : 'the current releases'}${assumedNote('software_assumed', r.software_assumed)}`;
  html += ' <small>(<code>--stack</code> or the run\'s <code>software</code> changes it)</small>';
  const run = r.run || {};
  if (typeof run.use_reentrant === 'boolean')
    html += `; checkpointing: ${fig('run.use_reentrant', run.use_reentrant, run.use_reentrant ? 'reentrant' : 'non-reentrant')}` +
            ' <small>(<code>--use-reentrant</code> or the run\'s <code>use_reentrant</code>)</small>';
  html += '</p>';
  return html + allocatorText(r.allocator);
}

// The report's word on a stack nobody stated ("the current releases"), after the versions.
function assumedNote(path, assumed) {
  return assumed ? ` (${textFig(path, assumed)})` : '';
}

// A vision report's model (its "architecture") and the software its estimate assumes.
function renderVisionModel(r, stack) {
  const a = r.architecture;
  return `<p>Model: ${textFig('architecture.source', a.source)} ${textFig('architecture.family', a.family)}, ` +
         `${countFig('architecture.parameters', a.parameters)} parameters, ${countFig('architecture.classes', a.classes)} classes; ` +
         `image ${textFig('run.image', r.run.image)}${r.run.channels_last ? ' channels_last' : ''}; ` +
         `software assumed: ${stack.join(', ')}${assumedNote('software_assumed', r.software_assumed)} <small>(the software stack's torch, <code>--stack</code> or the run's ` +
         '<code>software</code> changes it)</small></p>';
}

// The caching allocator's replay: reserved, CUDA context, device and, with a GPU, the band and the verdict.
function allocatorText(a) {
  if (!a) return '';
  const conf = a.alloc_conf ? `PYTORCH_CUDA_ALLOC_CONF=${textFig('allocator.alloc_conf', a.alloc_conf)}` : 'default settings';
  let html = `<p>Caching allocator (${conf}): ${textFig('allocator.reason', a.reason)}. Tensors ${bytesFig('allocator.tensor', a.tensor)}, ` +
          `reserved ${bytesFig('allocator.reserved', a.reserved)}, CUDA context ${bytesFig('allocator.context.total', a.context.total)} ` +
          `(${textFig('allocator.context.source', a.context.source)}; modules loaded ` +
          `${textFig('allocator.context.module_loading', a.context.module_loading)}), device ${bytesFig('allocator.device', a.device)}`;
  if (a.verdict) {  // with a GPU: the band of the run's class and the verdict at the budget
    html += ` (between ${bytesFig('allocator.range.low', a.range.low)} and ${bytesFig('allocator.range.high', a.range.high)}: ` +
            `band ${fig('allocator.band.low', a.band.low, percent(a.band.low))} .. ` +
            `${fig('allocator.band.high', a.band.high, percent(a.band.high))}, ${textFig('allocator.band.class', a.band.class)}, ${textFig('allocator.band.quantity', a.band.quantity)}); ` +
            `at the budget: <b class="v-${esc(a.verdict)}">${textFig('allocator.verdict', a.verdict)}</b>`;
  }
  return html + '.</p>';
}

function renderModeTable(p) {
  let html = '<tr><th>mode</th><th>peak</th><th>up to</th><th>verdict</th><th>error band</th><th>switches on</th>' +
             '<th>transfers / step</th><th>host RAM</th></tr>';
  p.modes.forEach((m, i) => {
    const at = `plan.modes.${i}`;
    html += `<tr${m.mode === p.mode ? ' class="chosen-row"' : ''}><th>${textFig(at + '.mode', m.mode)}</th>` +
            `<td>${bytesFig(at + '.peak', m.peak)}</td><td>${bytesFig(at + '.peak_range.high', m.peak_range.high)}</td>` +
            `<td class="v-${esc(m.verdict)}">${textFig(at + '.verdict', m.verdict)}</td>` +
            `<td>${fig(at + '.band.low', m.band.low, percent(m.band.low))} .. ${fig(at + '.band.high', m.band.high, percent(m.band.high))}</td>` +
            `<td class="wrap">${esc(m.switches_on.join(', ') || '-')}</td>` +
            `<td>${fig(at + '.transfer_seconds_per_step', m.transfer_seconds_per_step, m.transfer_seconds_per_step.toFixed(2) + ' s')}</td>` +
            `<td>${bytesFig(at + '.host_memory', m.host_memory)}</td></tr>`;
  });
  return html;
}

// ---------------------------------------------------------------------------------------
// generate()'s report (memscale-plan --inference --json): the plan, the phases' peaks, the allocator.
function renderInferenceVerdict(r) {
  if (!r.plan) return '<p>Pick a GPU to get a verdict: whether generate() fits it, and the largest batch and context that do.</p>';
  const p = r.plan;
  let html = `<p class="chosen">generate(): <b class="v-${esc(p.verdict)}">${textFig('plan.verdict', p.verdict)}</b>` +
             ` — device peak ${r.allocator ? bytesFig('allocator.device', r.allocator.device) : bytesFig('peak.device', r.peak.device)}` +
             ` against a budget of ${bytesFig('plan.budget', p.budget)}` +
             ` (VRAM ${bytesFig('plan.vram', p.vram)}); memory pressure ${fig('plan.pressure', p.pressure, p.pressure.toFixed(2))}</p>`;
  html += `<p>Largest batch at this context: ${countFig('plan.max_batch', p.max_batch)}; largest context at this batch: ` +
          `${countFig('plan.max_context', p.max_context)} <small>(the band's upper end within the budget)</small></p>`;
  return html;
}

function renderInferencePeaks(r) {
  const row = (label, at, peak) =>
    `<tr><th>${label}</th><td>${bytesFig(at + '.tensor', peak.tensor)}</td><td>${bytesFig(at + '.reserved', peak.reserved)}</td>` +
    `<td>${bytesFig(at + '.device', peak.device)}</td><td>${textFig(at + '.at', peak.at)}</td></tr>`;
  const inf = r.inference;
  return '<tr><th></th><th>allocated<br><small>max_memory_allocated</small></th><th>reserved<br><small>by the rounding rule</small></th>' +
         '<th>device<br><small>+ CUDA context</small></th><th>at</th></tr>' +
         row('prefill', 'prefill', r.prefill) + (inf.new_tokens > 1 ? row('decode', 'decode', r.decode) : '') +
         row('peak', 'peak', r.peak) +
         `<tr><th>parameters</th><td colspan="4">${countFig('parameter_count', r.parameter_count)}, weights ` +
         `${bytesFig('weight_bytes', r.weight_bytes)}</td></tr>` +
         `<tr><th>KV cache</th><td colspan="4">${textFig('inference.kv_cache', inf.kv_cache)} in ${textFig('inference.kv_dtype', inf.kv_dtype)}: ` +
         `${countFig('kv_bytes_per_token', r.kv_bytes_per_token)} bytes per token, ${bytesFig('kv_cache_bytes', r.kv_cache_bytes)} after the last token</td></tr>`;
}

function renderInferenceSoftware(r) {
  const sw = r.inference.software;
  let html = `<p>Software assumed: torch ${textFig('inference.software.torch', sw.torch)}, transformers ` +
             `${textFig('inference.software.transformers', sw.transformers)}, CUDA ` +
             (sw.cuda ? `${textFig('inference.software.cuda', sw.cuda)}, modules` : 'modules') + ' loaded ' +
             `${sw.cuda_lazy_loading ? 'lazily' : 'eagerly'}` +
             assumedNote('inference.software.assumed', sw.assumed) +
             (sw.tuple_cache ? '; the model returns tuple caches: generate() holds the previous step\'s while the next is built' : '') +
             ' <small>(the software stack above, <code>--stack</code> or the run\'s <code>software</code> changes it)</small></p>';
  return html + allocatorText(r.allocator);
}

function renderInference(r) {
  const vram = r.plan ? r.plan.vram : 0;
  const plan = r.plan ? {vram: vram, budget: r.plan.budget} : null;
  $('verdict').innerHTML = renderInferenceVerdict(r);
  const a = r.allocator;
  const marks = [
    {label: 'allocated', value: r.peak.tensor},
    {label: 'reserved', value: a ? a.reserved : r.peak.reserved},
    {label: 'device', value: a ? a.device : r.peak.device},
  ];
  // The marked row first: its labels stand above the bars.
  const rows = [{label: 'whole call', breakdown: r.peak.breakdown, peak: marks[2].value, marks: marks},
                {label: 'prefill', breakdown: r.prefill.breakdown, peak: r.prefill.tensor}];
  if (r.inference.new_tokens > 1) rows.push({label: 'decode', breakdown: r.decode.breakdown, peak: r.decode.tensor});
  stackedBars('breakdown', rows, plan, 'allocator cache + CUDA context', INFERENCE_COMPONENTS);
  $('peaks').innerHTML = renderInferencePeaks(r);
  $('allocator').innerHTML = renderInferenceSoftware(r);
}

function render(r, cliff) {
  const gen = generating();
  // Touched only when the task changes: a slider move lays out nothing it does not redraw.
  if ($('train-results').hidden !== gen) {
    $('train-results').hidden = gen;
    $('breakdown-note').textContent = gen ? '(the prompt\'s forward pass, each decoding step, the whole call)'
                                          : '(steady state, step 2+)';
  }
  if (gen) {
    // The hidden training results keep no figures of an earlier plan.
    $('mode-table').innerHTML = '';
    $('cliff').hidden = true;
    return renderInference(r);
  }
  // VRAM is the GPU's memory: the catalog's, or the one typed (the report's "gpu").
  const vram = !r.gpu ? 0 : typeof r.gpu === 'string' ? state.gpus.find((g) => g.name === r.gpu).memory : r.gpu.memory;
  const plan = r.plan ? Object.assign({vram: vram}, r.plan) : null;
  $('verdict').innerHTML = renderVerdict(r);
  const marks = [
    {label: 'allocated', value: r.peak.tensor},
    {label: 'reserved', value: r.peak.reserved},
    {label: 'device', value: r.peak.device},
  ];
  stackedBars('breakdown', [{label: 'step 2+', breakdown: r.breakdown, peak: r.peak.device, marks: marks}], plan,
              'allocator cache + CUDA context');
  $('peaks').innerHTML = renderPeaks(r);
  $('allocator').innerHTML = renderAllocator(r);
  $('modes').hidden = !plan;
  // Not even micro-batch 1 fits in any mode: a note instead of curves, as memscale-plan --svg-batch.
  const curves = !!plan && !!cliff && plan.max_micro_batch > 0;
  $('cliff-title').hidden = !plan || !cliff;
  $('cliff').hidden = !curves;
  $('cliff-note').hidden = !plan || !cliff || curves;
  $('no-gpu').hidden = !!plan;
  $('no-gpu').textContent = r.gpu ? 'No modes for this run: its layout and checkpointing policy are its framework\'s own.'
                                  : 'Pick a GPU to compare the modes and see where the run stops fitting.';
  if (plan) {
    stackedBars('modes', plan.modes.map((m) => ({label: m.mode, breakdown: m.breakdown, peak: m.peak})), plan,
                'allocator cache + CUDA context');
    $('mode-table').innerHTML = renderModeTable(plan);
    if (curves) cliffChart('cliff', cliff, plan, r.run.micro_batch);
  } else {
    $('mode-table').innerHTML = '';
  }
}

// The downloads are blob URLs; made after the answer is drawn (a slider move does not wait
// for them), and only for the last answer when several come in a row.
function refreshDownloads() {
  state.downloadTimer = 0;
  for (const url of state.urls) URL.revokeObjectURL(url);
  state.urls = [];
  const set = (id, text) => {
    const url = URL.createObjectURL(new Blob([text], {type: 'application/json'}));
    state.urls.push(url);
    $(id).href = url;
  };
  set('download-run', state.runText);
  if (state.report) set('download-plan', state.report);
  else $('download-plan').removeAttribute('href');
}

// Recomputes and redraws; called by every control.
function update() {
  const start = performance.now();
  const doc = runDocument();
  state.runText = JSON.stringify(doc, null, 2) + '\n';
  const answer = callWasm('memscale_report', JSON.stringify(doc));
  document.body.classList.toggle('failed', !answer.ok);
  $('error').hidden = answer.ok;
  if (!answer.ok) {
    $('error').textContent = answer.error;
    state.report = '';
  } else {
    state.report = answer.report;
    render(JSON.parse(answer.report), answer.cliff);
  }
  if (!state.downloadTimer) state.downloadTimer = setTimeout(refreshDownloads, 0);
  $('batch-out').textContent = $('batch').value;
  $('seq-out').textContent = $('seq').value;
  $('headroom-out').textContent = Number($('headroom').value).toFixed(2);
  void document.body.offsetHeight;  // the layout belongs to the answer
  const ms = performance.now() - start;
  window.memscaleTimings.push(ms);
  $('timing').textContent = `computed and drawn in ${ms.toFixed(1)} ms`;
}

// ---------------------------------------------------------------------------------------
// The model: a preset, a config.json, or a vision model.
// A vision model: its controls instead of the sequence, adapters and framework (style.css body.vision);
// it trains only, and checkpoints whole stages (no selective checkpointing).
function visionChanged() {
  const vision = visionModel();
  document.body.classList.toggle('vision', vision);
  $('generate-task').disabled = vision;
  $('selective').disabled = vision;
  if (vision && $('checkpointing').value === 'selective') $('checkpointing').value = 'full';
  if (vision && generating()) {
    $('task').value = 'train';
    taskChanged();
  }
}

function modelChanged() {
  visionChanged();
  const usesConfig = $('model').value === CONFIG;
  $('config-box').hidden = !usesConfig;
  if (usesConfig && state.config === null) {
    $('model-info').textContent = 'Paste or drop a config.json.';
    return false;
  }
  const info = callWasm('memscale_model', JSON.stringify(modelDescription()));
  if (!info.ok) {
    $('model-info').textContent = '';
    $('error').hidden = false;
    $('error').textContent = info.error;
    return false;
  }
  if (info.vision) {  // the preset's own input size becomes the image control's value
    const v = info.vision;
    const [h, w] = v.image.split('x');
    $('image').value = h === w ? h : v.image;
    $('model-info').textContent = `${v.name}: ${count(v.parameters)} parameters, ${v.family} (${v.source}), ${v.classes} classes, ` +
                                  `${v.image} input by default`;
    return true;
  }
  $('model-info').textContent = `${info.name}: ${count(info.parameters)} parameters, ${info.layers} layers, hidden ${info.hidden}` +
                                (info.max_seq_len ? `, up to ${info.max_seq_len} tokens` : '');
  const seq = $('seq');
  seq.max = String(info.max_seq_len || 32768);
  if (Number(seq.value) > Number(seq.max)) seq.value = seq.max;
  return true;
}

function readConfig(text) {
  try {
    state.config = JSON.parse(text);
  } catch (e) {
    state.config = null;
    $('error').hidden = false;
    $('error').textContent = 'config.json: ' + e.message;
    return;
  }
  $('model').value = CONFIG;
  if (modelChanged()) update();
}

function adapterChanged() {
  const target = $('target').value;
  $('adapter-box').hidden = target === 'full';
  $('double-quant-box').hidden = target !== 'qlora';
}

function taskChanged() {
  const gen = generating();
  for (const el of document.querySelectorAll('.train-only')) el.hidden = gen;
  $('generate-box').hidden = !gen;
}

function cacheChanged() {
  const quantized = $('kv-cache').value === 'quantized' && $('gen-loop').value !== 'gpt-fast';
  $('kv-bits-box').hidden = !quantized;
  $('kv-dtype').disabled = quantized;
}

// Each loop takes its own weight formats (gpt-fast: its quantize.py layers; transformers:
// bitsandbytes, GPTQ, AWQ); a format the other loop owns falls back to bf16.
function loopChanged() {
  const gptFast = $('gen-loop').value === 'gpt-fast';
  for (const o of document.querySelectorAll('#weights .hf-weights')) o.disabled = gptFast;
  for (const o of document.querySelectorAll('#weights .gptfast-weights')) o.disabled = !gptFast;
  if ($('weights').selectedOptions[0].disabled) $('weights').value = 'bf16';
  $('kv-cache-box').hidden = gptFast;
  weightsChanged();
  cacheChanged();
}

function weightsChanged() {
  $('group-size-box').hidden = $('weights').value !== 'gptfast-int4';
}

function frameworkChanged() {
  $('torchtitan-box').hidden = $('framework').value !== 'torchtitan';
  $('torchtune-box').hidden = $('framework').value !== 'torchtune';
  $('sac-every-box').hidden = $('sac-policy').value !== 'layer';
  $('reentrant-box').hidden = $('framework').value !== 'hf' || $('checkpointing').value !== 'full';
}

// torchtitan's policies go with a checkpointing setting (run-json.md: full with full, op and
// layer:K with selective): choosing one sets the checkpointing control to match.
function sacPolicyChanged() {
  const sac = $('sac-policy').value;
  if (sac === 'full') $('checkpointing').value = 'full';
  else if (sac !== 'none') $('checkpointing').value = 'selective';
  frameworkChanged();
}

function packingChanged() {
  $('example-tokens-box').hidden = $('packing').value !== 'padding_free';
}

function gpuChanged() {
  $('gpu-memory-box').hidden = $('gpu').value !== CUSTOM_GPU;
}

function start() {
  const catalog = callWasm('memscale_catalog', '');
  state.gpus = catalog.gpus;
  const model = $('model');
  for (const m of catalog.models) model.add(new Option(`${m.name} (${(m.parameters / 1e9).toFixed(2)} B)`, m.name));
  model.add(new Option('config.json ...', CONFIG));
  // The vision models, one group per model code (torchvision, timm).
  for (const [source, title] of [['torchvision', 'vision: torchvision'], ['timm', 'vision: timm']]) {
    const group = document.createElement('optgroup');
    group.label = title;
    for (const m of catalog.vision_models.filter((v) => v.source === source)) {
      state.vision.add(m.name);
      group.appendChild(new Option(`${m.name} (${(m.parameters / 1e6).toFixed(1)} M)`, m.name));
    }
    model.appendChild(group);
  }
  model.value = 'gpt2';
  const gpu = $('gpu');
  gpu.add(new Option('none (estimate only)', ''));
  for (const g of catalog.gpus) gpu.add(new Option(`${g.label} (${(g.memory / GIB).toFixed(0)} GiB)`, g.name));
  gpu.add(new Option('custom memory ...', CUSTOM_GPU));
  gpu.value = catalog.gpus.some((g) => g.name === 'rtx4090') ? 'rtx4090' : catalog.gpus[0].name;
  $('headroom').value = String(catalog.headroom.default);

  model.addEventListener('change', () => { if (modelChanged()) update(); });
  $('target').addEventListener('change', () => { adapterChanged(); update(); });
  $('gpu').addEventListener('change', () => { gpuChanged(); update(); });
  $('task').addEventListener('change', () => { taskChanged(); update(); });
  $('kv-cache').addEventListener('change', () => { cacheChanged(); update(); });
  for (const id of ['context', 'new-tokens']) $(id).addEventListener('input', update);
  $('gen-loop').addEventListener('change', () => { loopChanged(); update(); });
  $('weights').addEventListener('change', weightsChanged);
  for (const id of ['weights', 'group-size', 'kv-dtype', 'kv-bits', 'gen-attention']) $(id).addEventListener('change', update);
  for (const id of ['batch', 'seq', 'headroom']) $(id).addEventListener('input', update);
  for (const id of ['grad-accum', 'lora-rank', 'lora-targets', 'gpu-memory', 'image']) $(id).addEventListener('input', update);
  for (const id of ['precision', 'optimizer', 'optimizer-impl', 'paged-optimizer', 'attention', 'dropout', 'double-quant', 'liger', 'padded', 'use-reentrant', 'channels-last'])
    $(id).addEventListener('change', update);
  $('checkpointing').addEventListener('change', () => { frameworkChanged(); update(); });
  $('framework').addEventListener('change', () => { frameworkChanged(); update(); });
  $('sac-policy').addEventListener('change', () => { sacPolicyChanged(); update(); });
  $('packing').addEventListener('change', () => { packingChanged(); update(); });
  for (const id of ['data-parallel', 'tune-ranks', 'sac-every', 'example-tokens', 'sw-transformers', 'sw-torch', 'sw-bitsandbytes', 'sw-cuda',
                    'alloc-conf', 'context-memory']) $(id).addEventListener('input', update);
  // A pasted or typed config.json is read when the typing pauses (and on leaving the box).
  let typing = 0;
  $('config').addEventListener('input', () => {
    clearTimeout(typing);
    typing = setTimeout(() => readConfig($('config').value), 400);
  });
  $('config').addEventListener('change', () => { clearTimeout(typing); readConfig($('config').value); });
  $('config-file').addEventListener('change', (e) => { const f = e.target.files[0]; if (f) f.text().then(readConfig); });
  const box = $('config');
  box.addEventListener('dragover', (e) => e.preventDefault());
  box.addEventListener('drop', (e) => {
    e.preventDefault();
    const f = e.dataTransfer.files[0];
    if (f) f.text().then((t) => { box.value = t; readConfig(t); });
  });

  adapterChanged();
  taskChanged();
  cacheChanged();
  gpuChanged();
  frameworkChanged();
  packingChanged();
  modelChanged();
  update();
  window.memscaleReady = true;
}

// The module is loaded after the page: `Module` must exist before memscale_web.js runs.
var Module = {onRuntimeInitialized: start};
const loader = document.createElement('script');
loader.src = 'memscale_web.js';
document.body.appendChild(loader);
