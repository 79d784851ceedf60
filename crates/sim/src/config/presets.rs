//! Model and GPU presets: the figures the roofline needs of a transformer
//! ([`ModelSpec`]) and of one GPU ([`GpuSpec`]), by name.

/// Bytes in a GiB.
pub(crate) const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// A transformer model as the roofline sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSpec {
    /// Preset name (`llama-3.1-8b`), or the name given in the overrides.
    pub name: String,
    /// Parameter count (all weights, e.g. 8.03e9).
    pub params: f64,
    /// Transformer layers.
    pub layers: u32,
    /// Key/value heads (grouped-query attention).
    pub kv_heads: u32,
    /// Dimension of one attention head.
    pub head_dim: u32,
    /// Query (attention) heads.
    pub heads: u32,
    /// Hidden size (width of the residual stream).
    pub hidden: u32,
    /// Vocabulary size (rows of the embedding and of the untied output layer).
    pub vocab: u32,
    /// Bytes per weight (2 for BF16, 1 for FP8).
    pub weight_bytes_per_param: f64,
    /// Bytes per KV-cache element (2 for BF16, 1 for FP8).
    pub kv_bytes_per_elem: f64,
    /// Longest sequence (prompt + output) a request may have.
    pub max_model_len: u32,
}

impl ModelSpec {
    /// The preset of a model name (case-insensitive), if known.
    pub fn preset(name: &str) -> Option<ModelSpec> {
        let n = name.to_ascii_lowercase();
        // Both have 8 KV heads of 128, a vocabulary of 128,256 and an untied output
        // layer.
        let (params, layers, hidden, heads) = match n.as_str() {
            // Llama-3.1-8B: 8.03e9 parameters, 32 layers, hidden 4096, 32 query heads.
            "llama-3.1-8b" | "llama3.1-8b" | "8b" => (8.03e9, 32, 4096, 32),
            // Llama-3.1-70B: 70.55e9 parameters, 80 layers, hidden 8192, 64 query heads.
            "llama-3.1-70b" | "llama3.1-70b" | "70b" => (70.55e9, 80, 8192, 64),
            _ => return None,
        };
        let canonical = if layers == 32 {
            "llama-3.1-8b"
        } else {
            "llama-3.1-70b"
        };
        Some(ModelSpec {
            name: canonical.to_string(),
            params,
            layers,
            kv_heads: 8,
            head_dim: 128,
            heads,
            hidden,
            vocab: 128_256,
            weight_bytes_per_param: 2.0,
            kv_bytes_per_elem: 2.0,
            max_model_len: 131_072,
        })
    }

    /// Names of the model presets.
    pub const PRESETS: [&'static str; 2] = ["llama-3.1-8b", "llama-3.1-70b"];

    /// Bytes of all weights.
    pub fn weight_bytes(&self) -> f64 {
        self.params * self.weight_bytes_per_param
    }

    /// Parameters of the input embedding, and of the (untied) output layer:
    /// vocabulary × hidden size each.
    pub fn embedding_params(&self) -> f64 {
        f64::from(self.vocab) * f64::from(self.hidden)
    }

    /// What `--explain` calls the model: the preset's name, or, when a knob changed
    /// its shape, `custom (NAME with KEY VALUE, …)` naming every changed knob.
    pub fn label(&self) -> String {
        let Some(p) = ModelSpec::preset(&self.name) else {
            return self.name.clone();
        };
        let changed: Vec<String> = [
            ("params_b", p.params / 1e9, self.params / 1e9),
            ("layers", p.layers.into(), self.layers.into()),
            ("kv_heads", p.kv_heads.into(), self.kv_heads.into()),
            ("head_dim", p.head_dim.into(), self.head_dim.into()),
            ("heads", p.heads.into(), self.heads.into()),
            ("hidden_size", p.hidden.into(), self.hidden.into()),
            ("vocab_size", p.vocab.into(), self.vocab.into()),
            (
                "weight_bytes_per_param",
                p.weight_bytes_per_param,
                self.weight_bytes_per_param,
            ),
            (
                "kv_bytes_per_elem",
                p.kv_bytes_per_elem,
                self.kv_bytes_per_elem,
            ),
        ]
        .into_iter()
        .filter(|(_, preset, now)| preset != now)
        .map(|(key, _, now)| format!("{key} {now}"))
        .collect();
        custom_label(&self.name, &changed)
    }
}

/// One GPU as the roofline sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuSpec {
    /// Preset name (`h100`), or the name given in the overrides.
    pub name: String,
    /// Device memory in bytes.
    pub memory_bytes: f64,
    /// Peak HBM bandwidth in bytes per second.
    pub hbm_bytes_per_sec: f64,
    /// Peak dense BF16 tensor FLOP/s (no sparsity).
    pub flops: f64,
}

impl GpuSpec {
    /// The preset of a GPU name (case-insensitive), if known. Figures are NVIDIA's
    /// datasheet peaks (SXM parts where there is a choice), dense BF16.
    pub fn preset(name: &str) -> Option<GpuSpec> {
        let n = name.to_ascii_lowercase();
        // Memory is what the driver reports (80 GiB for the "80 GB" parts, 140 GiB
        // for H200's "141 GB", 45 GiB for L40S's "48 GB").
        let (canonical, mem_gib, bw_tbs, tflops) = match n.as_str() {
            "h100" | "h100-sxm" | "h100-80gb" => ("h100", 80.0, 3.35, 989.0),
            "h200" | "h200-sxm" => ("h200", 140.0, 4.8, 989.0),
            "a100" | "a100-80gb" | "a100-sxm" => ("a100-80gb", 80.0, 2.039, 312.0),
            "l40s" => ("l40s", 45.0, 0.864, 362.0),
            _ => return None,
        };
        Some(GpuSpec {
            name: canonical.to_string(),
            memory_bytes: mem_gib * GIB,
            hbm_bytes_per_sec: bw_tbs * 1e12,
            flops: tflops * 1e12,
        })
    }

    /// What `--explain` calls the GPU: the preset's name, or `custom (NAME with KEY
    /// VALUE, …)` naming every knob that changed it.
    pub fn label(&self) -> String {
        let Some(p) = GpuSpec::preset(&self.name) else {
            return self.name.clone();
        };
        let changed: Vec<String> = [
            (
                "gpu_memory_gib",
                p.memory_bytes / GIB,
                self.memory_bytes / GIB,
            ),
            (
                "hbm_gb_per_s",
                p.hbm_bytes_per_sec / 1e9,
                self.hbm_bytes_per_sec / 1e9,
            ),
            ("tflops", p.flops / 1e12, self.flops / 1e12),
        ]
        .into_iter()
        .filter(|(_, preset, now)| preset != now)
        .map(|(key, _, now)| format!("{key} {now}"))
        .collect();
        custom_label(&self.name, &changed)
    }

    /// Names of the GPU presets.
    pub const PRESETS: [&'static str; 4] = ["h100", "h200", "a100-80gb", "l40s"];
}

/// `name` when nothing changed, else `custom (name with KEY VALUE, …)`.
fn custom_label(name: &str, changed: &[String]) -> String {
    if changed.is_empty() {
        name.to_string()
    } else {
        format!("custom ({name} with {})", changed.join(", "))
    }
}
