//! Each command's arguments and result, read from the commands' own signatures in
//! `commands.rs` (compiled in, so always the current text) and written as TypeScript: a
//! renamed parameter, a changed type or a new command changes `ui/src/bindings.ts`, and the
//! front end's calls stop compiling until they follow.
//!
//! Arguments are named as the web view sends them (Tauri's camelCase); the shell's own
//! parameters (`State`, `AppHandle`, windows) are not the web view's to send.

use syn::{FnArg, GenericArgument, Item, Pat, PathArguments, ReturnType, Type};

/// The parameters Tauri fills in itself.
const INJECTED: &[&str] = &["State", "AppHandle", "Window", "WebviewWindow", "Webview"];

/// One command's signature, in TypeScript.
#[derive(Debug, PartialEq)]
pub struct CommandSignature {
    pub name: String,
    /// `(name, type)` of each argument the web view sends, in order.
    pub args: Vec<(String, String)>,
    pub result: String,
}

/// Every `#[tauri::command]` in `source`, in the order written.
pub fn signatures(source: &str) -> Result<Vec<CommandSignature>, String> {
    let file = syn::parse_file(source).map_err(|e| format!("commands.rs does not parse: {e}"))?;
    let mut found = Vec::new();
    for item in file.items {
        let Item::Fn(function) = item else { continue };
        let is_command = function.attrs.iter().any(|a| {
            let segments: Vec<String> = a
                .path()
                .segments
                .iter()
                .map(|s| s.ident.to_string())
                .collect();
            segments == ["tauri", "command"]
        });
        if !is_command {
            continue;
        }
        let name = function.sig.ident.to_string();
        let mut args = Vec::new();
        for input in &function.sig.inputs {
            let FnArg::Typed(typed) = input else {
                return Err(format!("{name}: a command takes no self"));
            };
            if last_ident(&typed.ty).is_some_and(|t| INJECTED.contains(&t.as_str())) {
                continue;
            }
            let Pat::Ident(ident) = &*typed.pat else {
                return Err(format!("{name}: each argument needs a plain name"));
            };
            let arg = camel_case(ident.ident.to_string().trim_start_matches("r#"));
            args.push((
                arg,
                typescript(&typed.ty).map_err(|e| format!("{name}: {e}"))?,
            ));
        }
        let result = match &function.sig.output {
            ReturnType::Default => "void".to_string(),
            ReturnType::Type(_, ty) => {
                typescript(ok_type(ty)).map_err(|e| format!("{name}: {e}"))?
            }
        };
        found.push(CommandSignature { name, args, result });
    }
    Ok(found)
}

/// The `T` of `Reply<T>` or `Result<T, E>`: what the web view receives.
fn ok_type(ty: &Type) -> &Type {
    match last_ident(ty).as_deref() {
        Some("Reply" | "Result") => generic_args(ty).first().copied().unwrap_or(ty),
        _ => ty,
    }
}

fn last_ident(ty: &Type) -> Option<String> {
    match ty {
        Type::Path(path) => path.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

fn generic_args(ty: &Type) -> Vec<&Type> {
    let Type::Path(path) = ty else {
        return Vec::new();
    };
    let Some(last) = path.path.segments.last() else {
        return Vec::new();
    };
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return Vec::new();
    };
    args.args
        .iter()
        .filter_map(|a| match a {
            GenericArgument::Type(t) => Some(t),
            _ => None,
        })
        .collect()
}

/// A Rust type as serde sends it, in TypeScript; named types keep their names (the bindings
/// declare them, so one that is not declared fails the front end's build).
fn typescript(ty: &Type) -> Result<String, String> {
    match ty {
        Type::Tuple(t) if t.elems.is_empty() => Ok("void".into()),
        Type::Reference(r) => typescript(&r.elem),
        Type::Path(_) => {
            let name = last_ident(ty).unwrap_or_default();
            let args = generic_args(ty);
            let one = |what: &str| -> Result<String, String> {
                match args.as_slice() {
                    [inner] => typescript(inner),
                    _ => Err(format!("{what} needs one type")),
                }
            };
            Ok(match name.as_str() {
                "String" | "str" | "PathBuf" | "Path" => "string".into(),
                "bool" => "boolean".into(),
                "u8" | "u16" | "u32" | "u64" | "usize" | "i8" | "i16" | "i32" | "i64" | "isize"
                | "f32" | "f64" => "number".into(),
                "Option" => format!("{} | null", one("Option")?),
                "Vec" => {
                    let inner = one("Vec")?;
                    if inner.contains(' ') {
                        format!("({inner})[]")
                    } else {
                        format!("{inner}[]")
                    }
                }
                _ if args.is_empty() => name,
                _ => return Err(format!("{name}<…> has no TypeScript form here")),
            })
        }
        _ => Err("a type with no TypeScript form here".into()),
    }
}

/// `rules_only` → `rulesOnly`, as Tauri names a command's arguments for JavaScript.
fn camel_case(snake: &str) -> String {
    let mut out = String::with_capacity(snake.len());
    let mut upper = false;
    for c in snake.chars() {
        match c {
            '_' => upper = true,
            c if upper => {
                out.extend(c.to_uppercase());
                upper = false;
            }
            c => out.push(c),
        }
    }
    out
}

/// The TypeScript tables: `CommandArgs` and `CommandResults`, keyed by command name.
pub fn declarations(commands: &[CommandSignature]) -> String {
    let mut out = String::from(
        "\n/** Each command's arguments, as the web view sends them (camelCase). */\n\
         export type CommandArgs = {\n",
    );
    for c in commands {
        let args: Vec<String> = c.args.iter().map(|(n, t)| format!("{n}: {t}")).collect();
        match args.is_empty() {
            true => out.push_str(&format!("  \"{}\": Record<string, never>;\n", c.name)),
            false => out.push_str(&format!("  \"{}\": {{ {} }};\n", c.name, args.join("; "))),
        }
    }
    out.push_str("};\n\n/** What each command answers. */\nexport type CommandResults = {\n");
    for c in commands {
        out.push_str(&format!("  \"{}\": {};\n", c.name, c.result));
    }
    out.push_str("};\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commands_arguments_and_result_are_read_from_its_signature() {
        let source = r#"
            #[tauri::command]
            pub async fn clean_all(
                app: AppHandle,
                shell: State<'_, Shell>,
                project: String,
                rules_only: bool,
                segment: Option<usize>,
                shown: Vec<Speaker>,
                job: String,
            ) -> Reply<CleanupSummary> { summary(project) }

            /// Not a command.
            fn helper(x: u32) -> u32 { x }

            #[tauri::command]
            pub fn saved(settings: Config) -> Result<Option<PathBuf>, UiError> { Ok(None) }

            #[tauri::command]
            pub async fn nothing(shell: State<'_, Shell>) -> Reply<()> { Ok(()) }
        "#;
        let found = signatures(source).unwrap();
        let pairs = |c: &CommandSignature| {
            c.args
                .iter()
                .map(|(n, t)| format!("{n}: {t}"))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            found.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["clean_all", "saved", "nothing"]
        );
        assert_eq!(
            pairs(&found[0]),
            [
                "project: string",
                "rulesOnly: boolean",
                "segment: number | null",
                "shown: Speaker[]",
                "job: string"
            ]
        );
        assert_eq!(found[0].result, "CleanupSummary");
        assert_eq!(pairs(&found[1]), ["settings: Config"]);
        assert_eq!(found[1].result, "string | null");
        assert!(found[2].args.is_empty());
        assert_eq!(found[2].result, "void");
        let tables = declarations(&found);
        assert!(
            tables.contains("\"nothing\": Record<string, never>;"),
            "{tables}"
        );
        assert!(
            tables.contains("\"saved\": { settings: Config };"),
            "{tables}"
        );
    }

    #[test]
    fn a_type_with_no_typescript_form_is_refused_by_name() {
        let source =
            "#[tauri::command] pub fn odd(pair: HashMap<String, u32>) -> Reply<()> { Ok(()) }";
        let e = signatures(source).unwrap_err();
        assert!(e.contains("odd") && e.contains("HashMap"), "{e}");
    }
}
