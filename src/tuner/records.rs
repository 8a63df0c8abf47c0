//! The search's records in the tuning database: the space's label, the machine's key and
//! the fingerprint of the records it writes; the seeds and the model's samples it reads.

use super::*;

impl<'a> Tuning<'a> {
    /// The tuning database's label of this space: generated spaces share their records, a
    /// hand-written space's are its own (by file name).
    pub(super) fn space_label(&self) -> String {
        if self.o.generated {
            db::GENERATED.to_string()
        } else {
            self.o.space.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned())
        }
    }

    pub(super) fn machine(&self) -> String {
        let cores = crate::runtime::machine::Machine::host().cores;
        db::machine_key(self.o.run.threads.unwrap_or(cores))
    }

    /// Reads the tuning database: the workload's keys, the seeds (the best record of this
    /// workload on this machine first, then the best of each other size of its statements),
    /// and the model's samples (every record of its statements on this machine).
    pub(super) fn read_db(&mut self, first: &State) {
        let Ok((key, statements, _)) = auto::keys(first) else { return };
        self.keys = Some((key.clone(), statements.clone()));
        // Collecting measures nothing: no seeds, no model.
        let (Some(path), None) = (&self.o.db, self.o.collect) else { return };
        let d = db::Db::open(path);
        self.report.notes.extend(d.notes.iter().cloned());
        let (machine, label) = (self.machine(), self.space_label());
        for e in d.seeds(&key, &statements, &machine, &label) {
            self.seeds.push_back(e.params.clone());
        }
        for e in &d.entries {
            if e.statements == statements && e.machine == machine && e.features.len() == model::FEATURES {
                self.samples.push((e.features.clone(), e.median_s));
            }
        }
        if !self.seeds.is_empty() {
            self.report.notes.push(format!(
                "tuning database {}: {} seed{} measured first ({} record{} of these statements on this machine)",
                path.display(),
                self.seeds.len(),
                if self.seeds.len() == 1 { "" } else { "s" },
                self.samples.len(),
                if self.samples.len() == 1 { "" } else { "s" }
            ));
        }
    }

    /// Appends a measured candidate to the tuning database (a failure to write is a note).
    pub(super) fn record_db(&mut self, r: &Record, path: Vec<String>, features: Vec<f32>) {
        let Some(m) = r.median_s else { return };
        let params = r.params.iter().map(|s| (s.name.clone(), s.value.clone())).collect();
        self.append_db(params, path, m, features, false);
    }

    /// Records that the program as written beat every point of a generated space (beyond the
    /// spreads), at its final-round time: `teml auto` then hands back the program itself.
    pub(super) fn record_as_written(&mut self, median_s: f64) {
        if self.o.generated {
            self.append_db(BTreeMap::new(), Vec::new(), median_s, Vec::new(), true);
        }
    }

    /// Appends one record of this workload on this machine to the database (or the shard's own
    /// file); a failure to write is a note.
    pub(super) fn append_db(
        &mut self,
        params: BTreeMap<String, String>,
        path: Vec<String>,
        median_s: f64,
        features: Vec<f32>,
        as_written: bool,
    ) {
        let file = self.o.db.as_ref().map(|d| self.o.db_append.as_ref().unwrap_or(d));
        let (Some(file), Some((key, statements))) = (file, &self.keys) else { return };
        let e = db::Entry {
            version: db::VERSION,
            workload: key.clone(),
            statements: statements.clone(),
            machine: self.machine(),
            host: crate::runtime::machine::Machine::host().host_line(),
            space: self.space_label(),
            params,
            path,
            median_s,
            when: db::now(),
            features,
            as_written,
            fingerprint: self.fingerprint.clone(),
        };
        if let Err(err) = db::append(file, &e)
            && !self.report.notes.contains(&err)
        {
            self.report.notes.push(err);
        }
    }
}
