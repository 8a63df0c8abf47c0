//! Slurm: an array job whose tasks are teml commands, and a merge job that runs once the
//! array has ended (`--dependency=afterany`, so that a failed task does not hold the merge
//! back). The scripts are written where the work goes (a shared filesystem), submitted with
//! Slurm's own `sbatch`, and cancelled with `scancel` when only half of them went in: teml
//! schedules nothing itself.

use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;

/// An array job and its merge job.
#[derive(Clone, Debug)]
pub struct Job {
    /// The job names' stem (`teml-tune-mm`: the array `teml-tune-mm`, the merge
    /// `teml-tune-mm-merge`).
    pub name: String,
    /// What the job does, in a line (the scripts' first comment).
    pub what: String,
    /// The folder of the scripts, the manifest and the tasks' Slurm output
    /// (`DIR/task-<i>.out`, `DIR/merge.out`).
    pub dir: PathBuf,
    /// The folder the commands run in (`--chdir`).
    pub chdir: PathBuf,
    /// The teml binary the commands run (overridden by `$TEML` in the job's environment).
    pub teml: PathBuf,
    /// Each array task's teml arguments, by task index.
    pub tasks: Vec<Vec<String>>,
    /// The merge job's teml arguments.
    pub merge: Vec<String>,
    /// Files the commands read, written with the scripts (path, text): each task's options
    /// (`teml job DIR/task-K.json`).
    pub files: Vec<(PathBuf, String)>,
    /// CPUs per task (and for the merge job).
    pub cpus: usize,
    /// More `sbatch` options, for both jobs (`--partition=...`, `--time=...`).
    pub options: Vec<String>,
}

/// The written scripts.
#[derive(Clone, Debug, Serialize)]
pub struct Scripts {
    /// The array job's script.
    pub array: PathBuf,
    /// The merge job's script.
    pub merge: PathBuf,
    /// Array tasks.
    pub tasks: usize,
}

/// A submitted job: its ids and how to follow it.
#[derive(Clone, Debug, Serialize)]
pub struct Submitted {
    /// The scripts.
    pub scripts: Scripts,
    /// The array job's id.
    pub array_id: String,
    /// The merge job's id.
    pub merge_id: String,
}

impl Submitted {
    /// The commands that show the jobs' progress.
    pub fn progress(&self) -> String {
        format!(
            "squeue -j {a},{m}\nsacct -j {a},{m} --format=JobID,JobName%30,State,Elapsed,NodeList",
            a = self.array_id,
            m = self.merge_id
        )
    }
}

/// A word as the shell reads it back (quoted where it must be).
pub fn quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-+=:,./@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return word.to_string();
    }
    shlex::try_quote(word).map_or_else(|_| format!("'{}'", word.replace('\'', "'\\''")), |q| q.into_owned())
}

fn command_line(teml_args: &[String]) -> String {
    let args: Vec<String> = teml_args.iter().map(|a| quote(a)).collect();
    format!("\"$TEML\" {}", args.join(" "))
}

impl Job {
    fn header(&self, name: &str, output: &Path, extra: &[String]) -> String {
        let mut s = format!(
            "#!/bin/bash\n# {}\n# Written by teml {}; submit both jobs with the command that wrote them, or by hand:\n#   A=$(sbatch --parsable {}) && sbatch --dependency=afterany:${{A%%;*}} {}\n",
            self.what,
            env!("CARGO_PKG_VERSION"),
            quote(&self.dir.join("array.sbatch").display().to_string()),
            quote(&self.dir.join("merge.sbatch").display().to_string()),
        );
        s.push_str(&format!("#SBATCH --job-name={name}\n"));
        for l in extra {
            s.push_str(&format!("#SBATCH {l}\n"));
        }
        s.push_str(&format!("#SBATCH --cpus-per-task={}\n", self.cpus.max(1)));
        s.push_str(&format!("#SBATCH --output={}\n", output.display()));
        s.push_str(&format!("#SBATCH --chdir={}\n", self.chdir.display()));
        for o in &self.options {
            s.push_str(&format!("#SBATCH {o}\n"));
        }
        s.push_str("set -eu\n");
        s.push_str(&format!("TEML=${{TEML:-{}}}\n", quote(&self.teml.display().to_string())));
        s
    }

    /// Writes `DIR/array.sbatch` and `DIR/merge.sbatch`.
    pub fn write(&self) -> Result<Scripts, String> {
        if self.tasks.is_empty() {
            return Err("a Slurm array needs at least one task".into());
        }
        for o in &self.options {
            if !o.starts_with('-') || o.contains('\n') {
                return Err(format!(
                    "--slurm-opt: expected an sbatch option such as `--partition=NAME` or `--time=1:00:00`, found `{o}`"
                ));
            }
        }
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| format!("cannot create {}: {e}", self.dir.display()))?;
        let last = self.tasks.len() - 1;
        let mut array =
            self.header(&self.name, &self.dir.join("task-%a.out"), &[format!("--array=0-{last}")]);
        array.push_str(
            "# One task per array index; rerun task K alone with `sbatch --array=K` and this script,\n# then the merge job.\ncase \"${SLURM_ARRAY_TASK_ID:?this script is an array job: submit it with sbatch}\" in\n",
        );
        for (i, t) in self.tasks.iter().enumerate() {
            array.push_str(&format!("  {i}) exec {} ;;\n", command_line(t)));
        }
        array.push_str(&format!(
            "  *) echo \"no task $SLURM_ARRAY_TASK_ID: this array has tasks 0-{last}\" >&2; exit 2 ;;\nesac\n"
        ));
        let mut merge = self.header(&format!("{}-merge", self.name), &self.dir.join("merge.out"), &[]);
        merge.push_str(&format!("exec {}\n", command_line(&self.merge)));
        let scripts = Scripts {
            array: self.dir.join("array.sbatch"),
            merge: self.dir.join("merge.sbatch"),
            tasks: self.tasks.len(),
        };
        let files = self.files.iter().map(|(p, t)| (p, t.clone()));
        for (p, text) in files.chain([(&scripts.array, array), (&scripts.merge, merge)]) {
            std::fs::write(p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        }
        Ok(scripts)
    }

    /// Writes the scripts and submits them: the array, then the merge job depending on it.
    /// Where the merge job cannot be submitted, the array is cancelled (nothing is left
    /// half-submitted) and the error says so. The ids are recorded in `DIR/job.json`.
    pub fn submit(&self) -> Result<Submitted, String> {
        let scripts = self.write()?;
        let sbatch = crate::runtime::compiler::on_path("sbatch").ok_or_else(|| {
            format!(
                "--slurm: `sbatch` is not on the PATH (run teml where Slurm's commands are, a login node; \
                 --dry-run writes the scripts without submitting them: {})",
                self.dir.display()
            )
        })?;
        let array_id = sbatch_run(&sbatch, &[], &scripts.array)?;
        let merge_id = match sbatch_run(
            &sbatch,
            &[format!("--dependency=afterany:{array_id}")],
            &scripts.merge,
        ) {
            Ok(id) => id,
            Err(e) => {
                let cancelled = Command::new("scancel").arg(&array_id).output();
                let what = match cancelled {
                    Ok(o) if o.status.success() => {
                        format!(
                            "the array job {array_id} was cancelled (scancel {array_id}): nothing is left submitted"
                        )
                    }
                    Ok(o) => format!(
                        "the array job {array_id} could NOT be cancelled ({}): cancel it with `scancel {array_id}`",
                        String::from_utf8_lossy(&o.stderr).trim()
                    ),
                    Err(err) => format!(
                        "the array job {array_id} could NOT be cancelled (scancel: {err}): cancel it with `scancel {array_id}`"
                    ),
                };
                return Err(format!("{e}\n{what}"));
            }
        };
        let s = Submitted { scripts, array_id, merge_id };
        let manifest = serde_json::to_string_pretty(&s).map_err(|e| e.to_string())?;
        let p = self.dir.join("job.json");
        std::fs::write(&p, manifest).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        Ok(s)
    }
}

/// `sbatch --parsable [extra] script`: the job id, or Slurm's own message.
fn sbatch_run(sbatch: &Path, extra: &[String], script: &Path) -> Result<String, String> {
    let out = Command::new(sbatch)
        .arg("--parsable")
        .args(extra)
        .arg(script)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", sbatch.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // `--parsable` prints `id` or `id;cluster`.
    let id = stdout.trim().split(';').next().unwrap_or("").trim().to_string();
    if !out.status.success() || id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!(
            "sbatch {} was rejected ({}): {}",
            script.display(),
            out.status,
            if stderr.trim().is_empty() { stdout.trim() } else { stderr.trim() }
        ));
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(dir: &Path) -> Job {
        Job {
            name: "teml-tune-x".into(),
            what: "teml tune x.rhai on Slurm".into(),
            dir: dir.to_path_buf(),
            chdir: dir.to_path_buf(),
            teml: PathBuf::from("/opt/teml bin/teml"),
            tasks: vec![
                vec!["tune".into(), "a b.rhai".into()],
                vec!["tune".into(), "--cflags".into(), "-O2 -g".into()],
            ],
            merge: vec!["tune".into(), "--collect".into(), "2".into()],
            files: vec![(dir.join("task-0.json"), "{}".into())],
            cpus: 2,
            options: vec!["--partition=short".into()],
        }
    }

    #[test]
    fn scripts_quote_arguments_and_carry_options() {
        let dir = tempfile::tempdir().unwrap();
        let s = job(dir.path()).write().unwrap();
        let a = std::fs::read_to_string(&s.array).unwrap();
        assert!(a.contains("#SBATCH --array=0-1\n"), "{a}");
        assert!(a.contains("#SBATCH --cpus-per-task=2\n#SBATCH --output="), "{a}");
        assert!(a.contains("#SBATCH --partition=short\n"), "{a}");
        assert!(a.contains("TEML=${TEML:-'/opt/teml bin/teml'}"), "{a}");
        assert!(a.contains("  0) exec \"$TEML\" tune 'a b.rhai' ;;"), "{a}");
        assert!(a.contains("  1) exec \"$TEML\" tune --cflags '-O2 -g' ;;"), "{a}");
        let m = std::fs::read_to_string(&s.merge).unwrap();
        assert!(
            m.contains("#SBATCH --job-name=teml-tune-x-merge\n")
                && m.contains("exec \"$TEML\" tune --collect 2\n"),
            "{m}"
        );
        assert_eq!(std::fs::read_to_string(dir.path().join("task-0.json")).unwrap(), "{}");
        let out = Command::new("bash").arg("-n").arg(&s.array).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }

    #[test]
    fn an_option_that_is_not_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = job(dir.path());
        j.options = vec!["partition=short".into()];
        assert!(j.write().unwrap_err().contains("expected an sbatch option"));
    }
}
