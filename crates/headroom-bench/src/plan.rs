//! The memory budget planner behind `headroom plan`: how much of the card vLLM may take so the
//! audio backends keep their memory, and the bounded `vllm serve` flags that follow.
//!
//! vLLM's `--gpu-memory-utilization U` caps the whole instance (weights, activations, CUDA
//! graphs and the KV cache it preallocates) at U × card. The KV cache needs, per token,
//! 2 (K and V) × layers × KV heads × head dim × bytes per element; quantized weights do not
//! shrink it. A plan fits when weights + runtime overhead + KV for every sequence at full
//! context stay inside U × card, and U × card + what the audio backends hold + a reserve stay
//! inside the card.

use serde::{Deserialize, Serialize};

pub const MIB: f64 = 1024.0 * 1024.0;
const GIB_MIB: f64 = 1024.0;

/// The KV cache element type (`--kv-cache-dtype`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KvDtype {
    /// The model's dtype (fp16/bf16): 2 bytes.
    Auto,
    /// 1 byte: half the cache, some accuracy risk.
    Fp8,
}

impl KvDtype {
    pub fn bytes(self) -> u64 {
        match self {
            KvDtype::Auto => 2,
            KvDtype::Fp8 => 1,
        }
    }
    pub fn flag(self) -> &'static str {
        match self {
            KvDtype::Auto => "auto",
            KvDtype::Fp8 => "fp8",
        }
    }
}

impl std::str::FromStr for KvDtype {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" | "fp16" | "bf16" | "half" => Ok(KvDtype::Auto),
            "fp8" | "fp8_e4m3" | "fp8_e5m2" => Ok(KvDtype::Fp8),
            other => Err(format!("unknown KV cache dtype {other:?}: use auto or fp8")),
        }
    }
}

/// The text model's shape, as its `config.json` gives it, and its weights' size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextModel {
    pub name: String,
    pub weights_mib: f64,
    pub layers: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    /// The longest context the model itself supports.
    pub max_position_embeddings: Option<u32>,
    /// The weights' quantization (`awq`, `gptq`, ...), from `quantization_config.quant_method`.
    #[serde(default)]
    pub quantization: Option<String>,
}

/// Why a model description could not be read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PlanError {
    #[error("the model config lacks {0}")]
    MissingField(&'static str),
    #[error("the model config is not JSON: {0}")]
    NotJson(String),
    #[error("{0}")]
    Invalid(String),
}

impl TextModel {
    /// Reads the shape from a Hugging Face `config.json` (`num_hidden_layers`,
    /// `num_key_value_heads` or `num_attention_heads`, `head_dim` or `hidden_size` /
    /// `num_attention_heads`).
    pub fn from_hf_config(
        name: &str,
        config_json: &str,
        weights_mib: f64,
    ) -> Result<TextModel, PlanError> {
        let v: serde_json::Value =
            serde_json::from_str(config_json).map_err(|e| PlanError::NotJson(e.to_string()))?;
        // Multimodal configs keep the language model's numbers under `text_config`.
        let v = v.get("text_config").cloned().unwrap_or(v);
        let int = |k: &'static str| v.get(k).and_then(|x| x.as_u64()).map(|x| x as u32);
        let layers =
            int("num_hidden_layers").ok_or(PlanError::MissingField("num_hidden_layers"))?;
        let heads =
            int("num_attention_heads").ok_or(PlanError::MissingField("num_attention_heads"))?;
        let kv_heads = int("num_key_value_heads").unwrap_or(heads);
        let head_dim = match int("head_dim") {
            Some(d) => d,
            None => {
                let hidden = int("hidden_size").ok_or(PlanError::MissingField("hidden_size"))?;
                hidden / heads.max(1)
            }
        };
        Ok(TextModel {
            name: name.to_string(),
            weights_mib,
            layers,
            kv_heads,
            head_dim,
            max_position_embeddings: int("max_position_embeddings"),
            quantization: v
                .pointer("/quantization_config/quant_method")
                .and_then(|q| q.as_str())
                .map(str::to_string),
        })
    }

    /// Bytes of KV cache per token.
    pub fn kv_bytes_per_token(&self, dtype: KvDtype) -> u64 {
        2 * self.layers as u64 * self.kv_heads as u64 * self.head_dim as u64 * dtype.bytes()
    }

    /// Known models, for `headroom plan --model NAME` without a config file.
    pub fn preset(name: &str) -> Option<TextModel> {
        match name.to_ascii_lowercase().as_str() {
            // config.json: 28 layers, 28 heads, 4 KV heads, hidden 3584 → head dim 128. The
            // AWQ safetensors total about 5.58 GB (5,322 MiB) as published.
            "qwen/qwen2.5-7b-instruct-awq" | "qwen2.5-7b-instruct-awq" => Some(TextModel {
                name: "Qwen/Qwen2.5-7B-Instruct-AWQ".into(),
                weights_mib: 5322.0,
                layers: 28,
                kv_heads: 4,
                head_dim: 128,
                max_position_embeddings: Some(32768),
                quantization: Some("awq".into()),
            }),
            _ => None,
        }
    }
}

/// What the plan is asked for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanRequest {
    pub card_mib: f64,
    /// What the audio backends hold on the device (measured or given).
    pub audio_mib: f64,
    /// Kept free outside both (display, CUDA contexts of other processes, fragmentation).
    pub reserve_mib: f64,
    /// vLLM's own overhead beyond weights and KV: CUDA context, activations at the batched
    /// token budget, CUDA graphs.
    pub runtime_overhead_mib: f64,
    pub model: TextModel,
    pub context_tokens: u32,
    pub concurrency: u32,
    pub kv_dtype: KvDtype,
    /// Check this utilization instead of choosing the smallest that fits.
    pub utilization: Option<f64>,
}

/// A plan and the arithmetic behind it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub gpu_memory_utilization: f64,
    pub max_model_len: u32,
    pub max_num_seqs: u32,
    pub max_num_batched_tokens: u32,
    pub kv_cache_dtype: KvDtype,
    pub kv_bytes_per_token: u64,
    /// KV for every sequence at full context.
    pub kv_needed_mib: f64,
    /// Weights + overhead + KV needed.
    pub vllm_needed_mib: f64,
    /// U × card.
    pub vllm_budget_mib: f64,
    /// What vLLM will preallocate for KV at this utilization, and how many tokens that holds.
    pub kv_allocated_mib: f64,
    pub kv_capacity_tokens: u64,
    /// Card − vLLM budget − reserve: what audio can use.
    pub audio_room_mib: f64,
    pub fits: bool,
    pub steps: Vec<String>,
    pub warnings: Vec<String>,
}

impl Plan {
    /// The bounded `vllm serve` command (quantized weights run in half precision, as the
    /// reference configuration does).
    pub fn command(&self, model: &TextModel) -> String {
        let quantization = model
            .quantization
            .as_deref()
            .map(|q| format!("  --quantization {q} --dtype half \\\n"))
            .unwrap_or_default();
        format!(
            "vllm serve {} \\\n  --host 127.0.0.1 --port 8000 \\\n{quantization}  --gpu-memory-utilization {:.2} \\\n  --kv-cache-dtype {} \\\n  --max-model-len {} \\\n  --max-num-seqs {} \\\n  --max-num-batched-tokens {} \\\n  --enable-chunked-prefill",
            model.name,
            self.gpu_memory_utilization,
            self.kv_cache_dtype.flag(),
            self.max_model_len,
            self.max_num_seqs,
            self.max_num_batched_tokens
        )
    }
}

fn gib(mib: f64) -> String {
    format!("{:.2} GiB", mib / GIB_MIB)
}

/// Rounds a utilization up to the hundredth vLLM's flag is usually written in.
fn round_up_hundredth(u: f64) -> f64 {
    ((u * 100.0) - 1e-9).ceil() / 100.0
}

/// Works out the plan.
pub fn plan(req: &PlanRequest) -> Result<Plan, PlanError> {
    if req.card_mib <= 0.0 {
        return Err(PlanError::Invalid("the card size must be positive".into()));
    }
    if req.context_tokens == 0 || req.concurrency == 0 {
        return Err(PlanError::Invalid(
            "context and concurrency must be at least 1".into(),
        ));
    }
    if let Some(u) = req.utilization {
        if !(0.0..=1.0).contains(&u) || u == 0.0 {
            return Err(PlanError::Invalid(format!(
                "--gpu-memory-utilization must be in (0, 1], got {u}"
            )));
        }
    }
    let m = &req.model;
    let per_token = m.kv_bytes_per_token(req.kv_dtype);
    let tokens = req.context_tokens as u64 * req.concurrency as u64;
    let kv_needed = (per_token * tokens) as f64 / MIB;
    let needed = m.weights_mib + req.runtime_overhead_mib + kv_needed;
    let mut steps = vec![
        format!(
            "KV per token = 2 (K,V) × {} layers × {} KV heads × {} head dim × {} B = {} B ({:.1} KiB)",
            m.layers,
            m.kv_heads,
            m.head_dim,
            req.kv_dtype.bytes(),
            per_token,
            per_token as f64 / 1024.0
        ),
        format!(
            "KV needed = {} B × {} tokens × {} sequences = {:.0} MiB",
            per_token, req.context_tokens, req.concurrency, kv_needed
        ),
        format!(
            "vLLM needs = weights {:.0} MiB + runtime overhead {:.0} MiB + KV {:.0} MiB = {:.0} MiB ({})",
            m.weights_mib,
            req.runtime_overhead_mib,
            kv_needed,
            needed,
            gib(needed)
        ),
    ];
    let utilization = match req.utilization {
        Some(u) => {
            steps.push(format!("utilization given: {u:.2}"));
            u
        }
        None => {
            let u = round_up_hundredth(needed / req.card_mib);
            steps.push(format!(
                "utilization = {:.0} / {:.0} MiB = {:.4} → {:.2} (rounded up)",
                needed,
                req.card_mib,
                needed / req.card_mib,
                u
            ));
            u
        }
    };
    let budget = utilization * req.card_mib;
    let kv_allocated = (budget - m.weights_mib - req.runtime_overhead_mib).max(0.0);
    let kv_capacity_tokens = (kv_allocated * MIB / per_token as f64).floor() as u64;
    let audio_room = req.card_mib - budget - req.reserve_mib;
    steps.push(format!(
        "vLLM budget = {:.2} × {:.0} MiB = {:.0} MiB; KV it preallocates = {:.0} − {:.0} − {:.0} = {:.0} MiB = {} tokens ({:.1} full-context sequences)",
        utilization,
        req.card_mib,
        budget,
        budget,
        m.weights_mib,
        req.runtime_overhead_mib,
        kv_allocated,
        kv_capacity_tokens,
        kv_capacity_tokens as f64 / req.context_tokens as f64
    ));
    steps.push(format!(
        "room for audio = {:.0} − {:.0} − reserve {:.0} = {:.0} MiB ({}); audio backends hold {:.0} MiB",
        req.card_mib,
        budget,
        req.reserve_mib,
        audio_room,
        gib(audio_room),
        req.audio_mib
    ));
    let mut warnings = Vec::new();
    let kv_fits = kv_capacity_tokens >= tokens;
    if !kv_fits {
        warnings.push(format!(
            "at {utilization:.2} vLLM has KV for {kv_capacity_tokens} tokens but {} sequences × {} tokens need {tokens}: raise the utilization, lower --max-model-len or --max-num-seqs, or use --kv-cache-dtype fp8",
            req.concurrency, req.context_tokens
        ));
    }
    let audio_fits = audio_room >= req.audio_mib;
    if !audio_fits {
        warnings.push(format!(
            "the audio backends need {:.0} MiB but only {:.0} MiB remain beside vLLM: this configuration runs out of memory when audio and text overlap",
            req.audio_mib, audio_room
        ));
    }
    if needed + req.audio_mib + req.reserve_mib > req.card_mib {
        // Say what would fit at the wanted concurrency.
        let spare = req.card_mib
            - req.audio_mib
            - req.reserve_mib
            - m.weights_mib
            - req.runtime_overhead_mib;
        let max_ctx = if spare > 0.0 {
            (spare * MIB / (per_token as f64 * req.concurrency as f64)).floor() as u64
        } else {
            0
        };
        warnings.push(format!(
            "the request cannot fit on a {} card: at {} sequences the longest context that fits is {} tokens",
            gib(req.card_mib),
            req.concurrency,
            max_ctx
        ));
    }
    if let Some(max) = m.max_position_embeddings {
        if req.context_tokens > max {
            warnings.push(format!(
                "{} supports at most {max} tokens of context",
                m.name
            ));
        }
    }
    let batched = req.context_tokens.min(2048);
    Ok(Plan {
        gpu_memory_utilization: utilization,
        max_model_len: req.context_tokens,
        max_num_seqs: req.concurrency,
        max_num_batched_tokens: batched,
        kv_cache_dtype: req.kv_dtype,
        kv_bytes_per_token: per_token,
        kv_needed_mib: kv_needed,
        vllm_needed_mib: needed,
        vllm_budget_mib: budget,
        kv_allocated_mib: kv_allocated,
        kv_capacity_tokens,
        audio_room_mib: audio_room,
        fits: kv_fits && audio_fits,
        steps,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qwen_request(utilization: Option<f64>) -> PlanRequest {
        PlanRequest {
            card_mib: 24.0 * 1024.0,
            audio_mib: 3000.0,
            reserve_mib: 512.0,
            runtime_overhead_mib: 1536.0,
            model: TextModel::preset("Qwen/Qwen2.5-7B-Instruct-AWQ").unwrap(),
            context_tokens: 4096,
            concurrency: 2,
            kv_dtype: KvDtype::Auto,
            utilization,
        }
    }

    #[test]
    fn qwen_awq_on_24_gib_at_0_45_matches_the_hand_computation() {
        let p = plan(&qwen_request(Some(0.45))).unwrap();
        // 2 × 28 × 4 × 128 × 2 B = 57,344 B = 56 KiB per token.
        assert_eq!(p.kv_bytes_per_token, 57_344);
        // 57,344 B × 4096 × 2 = 469,762,048 B = 448 MiB.
        assert_eq!(p.kv_needed_mib, 448.0);
        // 5322 + 1536 + 448 = 7306 MiB.
        assert_eq!(p.vllm_needed_mib, 7306.0);
        // 0.45 × 24576 = 11059.2 MiB budget; KV = 11059.2 − 5322 − 1536 = 4201.2 MiB
        // = 4201.2 × 1,048,576 / 57,344 = 76,821.9 → 76,821 tokens (18.8 sequences of 4096).
        assert!((p.vllm_budget_mib - 11059.2).abs() < 1e-9);
        assert!((p.kv_allocated_mib - 4201.2).abs() < 1e-9);
        assert_eq!(p.kv_capacity_tokens, 76_821);
        // Audio room = 24576 − 11059.2 − 512 = 13004.8 MiB ≥ 3000.
        assert!((p.audio_room_mib - 13004.8).abs() < 1e-9);
        assert!(p.fits, "{:?}", p.warnings);
        assert!(p.warnings.is_empty());
        let cmd = p.command(&qwen_request(None).model);
        for flag in [
            "--gpu-memory-utilization 0.45",
            "--max-model-len 4096",
            "--max-num-seqs 2",
            "--max-num-batched-tokens 2048",
            "--kv-cache-dtype auto",
            "--host 127.0.0.1",
            "vllm serve Qwen/Qwen2.5-7B-Instruct-AWQ",
            "--quantization awq --dtype half",
        ] {
            assert!(cmd.contains(flag), "{flag} missing from {cmd}");
        }
    }

    #[test]
    fn the_smallest_utilization_that_fits_is_chosen_and_rounded_up() {
        let p = plan(&qwen_request(None)).unwrap();
        // 7306 / 24576 = 0.29728 → 0.30.
        assert_eq!(p.gpu_memory_utilization, 0.30);
        assert!(p.fits);
        assert!(p.kv_capacity_tokens >= 8192);
    }

    #[test]
    fn a_request_that_cannot_fit_is_refused_with_what_would() {
        let mut req = qwen_request(None);
        req.context_tokens = 32768;
        req.concurrency = 8;
        req.audio_mib = 8000.0;
        let p = plan(&req).unwrap();
        // KV = 57,344 × 32768 × 8 B = 14,336 MiB; needed = 5322 + 1536 + 14336 = 21194.
        assert_eq!(p.kv_needed_mib, 14336.0);
        assert!(!p.fits);
        // Spare for KV = 24576 − 8000 − 512 − 5322 − 1536 = 9206 MiB → 9206 MiB / (56 KiB × 8)
        // = 21,042.3 → 21,042 tokens per sequence.
        let advice = p
            .warnings
            .iter()
            .find(|w| w.contains("cannot fit"))
            .unwrap();
        assert!(advice.contains("21042 tokens"), "{advice}");
        assert!(p
            .warnings
            .iter()
            .any(|w| w.contains("audio backends need 8000")));
    }

    #[test]
    fn fp8_halves_the_cache_and_a_low_utilization_is_flagged() {
        let mut req = qwen_request(Some(0.25));
        let p = plan(&req).unwrap();
        // 0.25 × 24576 = 6144 < 5322 + 1536: no room for KV at all.
        assert_eq!(p.kv_capacity_tokens, 0);
        assert!(!p.fits);
        req.kv_dtype = KvDtype::Fp8;
        req.utilization = None;
        let p = plan(&req).unwrap();
        assert_eq!(p.kv_bytes_per_token, 28_672);
        assert_eq!(p.kv_needed_mib, 224.0);
    }

    #[test]
    fn shapes_come_from_a_hugging_face_config() {
        let config = r#"{"num_hidden_layers": 28, "num_attention_heads": 28,
            "num_key_value_heads": 4, "hidden_size": 3584, "max_position_embeddings": 32768,
            "quantization_config": {"quant_method": "awq", "bits": 4}}"#;
        let m = TextModel::from_hf_config("qwen", config, 5322.0).unwrap();
        assert_eq!((m.layers, m.kv_heads, m.head_dim), (28, 4, 128));
        assert_eq!(m.quantization.as_deref(), Some("awq"));
        let mha = r#"{"num_hidden_layers": 2, "num_attention_heads": 8, "hidden_size": 512}"#;
        let m = TextModel::from_hf_config("mha", mha, 1.0).unwrap();
        assert_eq!((m.kv_heads, m.head_dim), (8, 64));
        assert_eq!(
            TextModel::from_hf_config("x", r#"{"hidden_size": 1}"#, 1.0),
            Err(PlanError::MissingField("num_hidden_layers"))
        );
        assert!(matches!(
            TextModel::from_hf_config("x", "nope", 1.0),
            Err(PlanError::NotJson(_))
        ));
    }
}
