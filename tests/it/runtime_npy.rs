//! `.npy` I/O against files written by NumPy (the fixtures) and, where NumPy is installed,
//! files read back by it.

use std::path::{Path, PathBuf};
use std::process::Command;

use teml::runtime::{NpyData, RuntimeError, read_npy, write_npy_f32, write_npy_f64};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

#[test]
fn reads_numpy_float64_and_float32() {
    // np.arange(6, dtype=np.float64).reshape(2, 3) * 0.5
    let a = read_npy(fixture("small.npy")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a.shape, [2, 3]);
    assert_eq!(a.data, NpyData::F64(vec![0.0, 0.5, 1.0, 1.5, 2.0, 2.5]));
    // (np.arange(8, dtype=np.float32) * 0.25).reshape(2, 2, 2)
    let b = read_npy(fixture("small_f32.npy")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(b.shape, [2, 2, 2]);
    assert_eq!(b.data, NpyData::F32((0..8).map(|i| i as f32 * 0.25).collect()));
    assert_eq!(b.data.to_f64()[3], 0.75);
    assert_eq!(b.data.len(), 8);
}

fn npy_message(name: &str) -> String {
    match read_npy(fixture(name)) {
        Err(e @ RuntimeError::Npy { .. }) => e.to_string(),
        other => panic!("expected an npy error for {name}, found {other:?}"),
    }
}

#[test]
fn unsupported_files_say_what_was_expected_and_found() {
    let m = npy_message("int64.npy");
    assert!(
        m.contains("int64.npy") && m.contains("expected dtype <f8") && m.contains("found <i8 (int64)"),
        "{m}"
    );
    let m = npy_message("fortran.npy");
    assert!(m.contains("expected C order") && m.contains("found Fortran order"), "{m}");
    let m = npy_message("big_endian.npy");
    assert!(m.contains("found >f8 (big-endian float64)"), "{m}");
    let m = npy_message("missing.npy");
    assert!(m.contains("missing.npy") && m.contains("cannot open"), "{m}");
}

fn numpy_available() -> bool {
    Command::new("python3").args(["-c", "import numpy"]).output().is_ok_and(|o| o.status.success())
}

#[test]
fn round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let p64 = dir.path().join("a.npy");
    let p32 = dir.path().join("b.npy");
    let xs: Vec<f64> = (0..12).map(|i| i as f64 / 3.0).collect();
    write_npy_f64(&p64, &[3, 4], &xs).unwrap();
    let back = read_npy(&p64).unwrap();
    assert_eq!((back.shape.as_slice(), back.data), (&[3u64, 4][..], NpyData::F64(xs.clone())));
    let ys: Vec<f32> = vec![1.5, -2.0, 3.25];
    write_npy_f32(&p32, &[3], &ys).unwrap();
    assert_eq!(read_npy(&p32).unwrap().data, NpyData::F32(ys));
    let scalar = dir.path().join("s.npy");
    write_npy_f64(&scalar, &[], &[7.0]).unwrap();
    assert_eq!(read_npy(&scalar).unwrap().shape, Vec::<u64>::new());

    let e = write_npy_f64(dir.path().join("bad.npy"), &[2, 2], &xs).expect_err("12 values for shape [2, 2]");
    assert!(e.to_string().contains("expected 4 elements for shape [2, 2], found 12"), "{e}");

    // numpy is a dependency of the tests (README; .ci/run installs it): its absence fails.
    assert!(
        numpy_available(),
        "python3 with numpy is required by this test: apt-get install python3-numpy (or pip install numpy)"
    );
    let check = format!(
        "import numpy as np\na = np.load({:?})\nb = np.load({:?})\n\
         assert a.dtype == np.float64 and a.shape == (3, 4) and a.flags.c_contiguous, a\n\
         assert np.array_equal(a.ravel(), np.arange(12) / 3.0), a\n\
         assert b.dtype == np.float32 and b.tolist() == [1.5, -2.0, 3.25], b\n",
        p64.to_str().unwrap(),
        p32.to_str().unwrap()
    );
    let out = Command::new("python3").args(["-c", &check]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
