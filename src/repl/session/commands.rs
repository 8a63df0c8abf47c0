//! The REPL's `:` commands: each one's parsing and what it does to the session.

use super::*;

impl Repl {
    pub(super) fn command(&mut self, line: &str) -> Result<String, String> {
        let (cmd, arg) = line.split_once(char::is_whitespace).map_or((line, ""), |(c, a)| (c, a.trim()));
        let need = |what: &str| if arg.is_empty() { Err(format!("{cmd}: expected {what}")) } else { Ok(arg) };
        match cmd {
            ":help" | ":h" | ":?" => Ok(help()),
            ":teml" => {
                self.mode = Mode::Teml;
                Ok("paper syntax".into())
            }
            ":rhai" => {
                self.mode = Mode::Rhai;
                self.session()?;
                Ok("Rhai syntax".into())
            }
            ":tree" => Ok(self.value(need("an identifier")?)?.tree().trim_end().to_string()),
            ":paper" => Ok(self.value(need("an identifier")?)?.paper()),
            ":lift" => {
                let id = need("a tensor expression (a product of several tensors)")?;
                let Value::Tensor(t) = self.value(id)?.clone() else {
                    return Err(format!(":lift: expected a tensor expression, found `{id}`, a loop nest"));
                };
                crate::ops::lift::describe(&self.state, &t).map_err(|e| e.to_string())
            }
            ":c" => {
                let id = need("a loop nest")?;
                self.request(id)?;
                let pipe = Pipeline::with_state(self.program(), self.state.clone(), self.opts());
                pipe.generate(&KernelRef::Nest(Name::from(id))).map(|k| k.source).map_err(|e| e.to_string())
            }
            ":history" => {
                let id = need("a loop nest")?;
                match self.state.get(id) {
                    Some(Value::Nest(n)) => Ok(n.history.lines().join("\n")),
                    Some(v) => Err(format!("`{id}` is {}: expected a loop nest", v.kind())),
                    None => Err(format!("unknown identifier `{id}`")),
                }
            }
            ":legal" => {
                let id = need("a loop nest")?;
                self.request(id)?;
                let Some(Value::Nest(n)) = self.state.get(id) else {
                    return Err(format!("`{id}` is not a loop nest"));
                };
                let v = crate::ops::explore::legal(&self.state, n)?;
                let perms = crate::ops::explore::permutations(&self.state, n, 4)?;
                let list: Vec<String> = perms.iter().map(|p| format!("{p:?}")).collect();
                let loops: Vec<String> = crate::ops::explore::parallelism(&self.state, n)?
                    .iter()
                    .map(|(r, i, p)| format!("  {i} (level {r}): {}", p.describe()))
                    .collect();
                Ok(format!(
                    "{id}: {}\nlegal orders of its outer loops: {}\nits loops:\n{}",
                    crate::ops::explore::describe(&v),
                    list.join(" "),
                    loops.join("\n")
                ))
            }
            ":auto" => {
                let id = need("a loop nest")?;
                self.request(id)?;
                let Some(Value::Nest(n)) = self.state.get(id) else {
                    return Err(format!("`{id}` is not a loop nest"));
                };
                crate::tuner::auto::explain(&self.state, id, n)
            }
            ":run" | ":time" => {
                let id = need("a loop nest")?;
                self.request(id)?;
                let mut opts = self.opts();
                if cmd == ":time" {
                    opts.timing = Some(Timing::default());
                }
                let pipe = Pipeline::with_state(self.program(), self.state.clone(), opts);
                let r = pipe.run(&KernelRef::Nest(Name::from(id))).map_err(|e| e.to_string())?.report;
                if r.verified { Ok(r.summary()) } else { Err(r.summary()) }
            }
            ":state" => Ok(self.state_listing()),
            ":def" => {
                // One rule with `-D` (ir::parse_define): a C identifier, then an integer.
                let def = crate::ir::parse_define(need("NAME=INT")?).map_err(|e| format!(":def: {e}"))?;
                let snap = self.snapshot(line);
                let msg = self.define(&[def], ":def")?;
                self.changed(snap);
                Ok(msg)
            }
            ":undo" => self.travel(false),
            ":redo" => self.travel(true),
            ":diff" => {
                let ids: Vec<&str> = need("two loop nests")?.split_whitespace().collect();
                let [a, b] = ids[..] else {
                    return Err(format!(":diff: expected two loop nests, found `{arg}`"));
                };
                self.diff(a, b)
            }
            ":export" => self.export(Path::new(need("a file")?)),
            ":export-kernel" => {
                let words: Vec<&str> = need("a loop nest and a directory")?.split_whitespace().collect();
                let [id, dir] = words[..] else {
                    return Err(format!(
                        ":export-kernel: expected a loop nest and a directory, found `{arg}`"
                    ));
                };
                self.request(id)?;
                let opts = self.opts();
                let about = crate::export::About {
                    program: "a teml REPL session".into(),
                    with: self.defines.iter().map(|(n, v)| format!("-D {n}={v}")).collect(),
                    flags: opts.flags.clone(),
                    rust: false,
                    verification: None,
                };
                let pipe = Pipeline::with_state(self.program(), self.state.clone(), opts);
                let e = crate::export::export_one(
                    &pipe,
                    &KernelRef::Nest(Name::from(id)),
                    id,
                    Path::new(dir),
                    &about,
                )
                .map_err(|e| format!(":export-kernel: {e}"))?;
                let files: Vec<String> = e.files.iter().map(|f| format!("  {}", f.display())).collect();
                Ok(format!(
                    "{id}: verified, exported ({})\n{}",
                    crate::export::describe(&e.sizes),
                    files.join("\n")
                ))
            }
            ":threads" => {
                let n: usize = need("a number")?
                    .parse()
                    .map_err(|_| format!(":threads: expected a number, found `{arg}`"))?;
                self.set_opts(|o| o.threads = Some(n));
                Ok(format!("{n} threads"))
            }
            ":cflags" => {
                let flags = Flags::parse(need("flags")?, ":cflags").map_err(|e| e.to_string())?;
                let msg = format!("flags: {}", flags.opt.join(" "));
                self.set_opts(|o| o.flags = flags);
                Ok(msg)
            }
            ":load" => {
                let (file, defines) = load_args(need("a file")?)?;
                self.load_file(Path::new(&file), &defines, line)
            }
            ":save" => {
                let path = need("a file")?;
                std::fs::write(path, self.state.to_json())
                    .map_err(|e| format!(":save: cannot write {path}: {e}"))?;
                Ok(format!("saved {path}"))
            }
            other => Err(format!(
                "unknown command `{other}`: expected one of {}",
                COMMANDS.iter().map(|(c, _)| c.split(' ').next().unwrap_or(c)).collect::<Vec<_>>().join(" ")
            )),
        }
    }
}
