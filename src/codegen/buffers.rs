//! Buffers the kernel allocates or converts: a tensor in another layout, a temporary the
//! kernel holds itself, and the parameters' declarations and casts.

use super::*;

/// The buffer of tensor `p` in layout `lay`: its name, the C that allocates it (zeroed: the
/// padding is defined; [`LAYOUT_BUFFER`]) and converts the tensor into it at kernel entry, and the C that converts
/// it back (if the kernel writes the tensor) and frees it at exit.
pub(super) fn convert(
    p: &Param,
    lay: &crate::ir::Layout,
    h: &mut Helpers,
    copy: bool,
) -> (String, String, String) {
    let ty = p.dtype.c_name();
    let buf = format!("teml_{}_layout", p.c_name);
    let ext: Vec<String> = lay.extents(&p.dims).iter().map(|e| c_expr(e, h, false)).collect();
    let tail: String = ext[1..].iter().map(|e| format!("[{e}]")).collect();
    let all: String = ext.iter().map(|e| format!("[{e}]")).collect();
    let decl = if ext.len() == 1 {
        format!("{ty} *restrict {buf}")
    } else {
        format!("{ty} (*restrict {buf}){tail}")
    };
    let rank = p.dims.len();
    let qs: Vec<Expr> = (0..rank).map(|k| Expr::var(&format!("teml_q{k}"))).collect();
    // The copy runs on the kernel's threads (its rows are independent).
    let mut loops = String::from("  #pragma omp parallel for\n");
    for (k, d) in p.dims.iter().enumerate() {
        let _ = writeln!(
            loops,
            "{}for (int teml_q{k} = 0; teml_q{k} <= {}; teml_q{k}++)",
            "  ".repeat(k + 1),
            c_expr(&d.add_int(-1), h, true)
        );
    }
    let at: String = lay.map(&qs).iter().map(|x| format!("[{}]", c_expr(x, h, false))).collect();
    let src: String = (0..rank).map(|k| format!("[teml_q{k}]")).collect();
    let pad = "  ".repeat(rank + 1);
    let mut pro = String::new();
    let _ = writeln!(
        pro,
        "  /* `{}` laid out {} for this kernel: {} */",
        p.c_name,
        lay.describe(rank),
        match (copy, p.written) {
            (false, _) => "a temporary of `lift`, not converted",
            (true, true) => "converted at entry and back at exit",
            (true, false) => "converted at entry",
        }
    );
    h.layouts = true;
    let _ = writeln!(pro, "  {decl} = teml_buffer(sizeof({ty}{all}));");
    let _ = writeln!(
        pro,
        "  if (!{buf}) {{ fputs(\"teml: out of memory laying out `{}`\\n\", stderr); abort(); }}",
        p.c_name
    );
    if copy {
        pro.push_str(&loops);
        let _ = writeln!(pro, "{pad}{buf}{at} = {}{src};", p.c_name);
    }
    let mut back = String::new();
    if p.written && copy {
        let _ = writeln!(back, "  /* `{}` back to its declared shape */", p.c_name);
        back.push_str(&loops);
        let _ = writeln!(back, "{pad}{}{src} = {buf}{at};", p.c_name);
    }
    let _ = writeln!(back, "  munmap({buf}, sizeof({ty}{all}));");
    (buf, pro, back)
}

/// A temporary of `lift` the kernel holds itself: its buffer allocated at entry (as a
/// layout's) under the name its accesses use, and released at exit.
pub(super) fn own_buffer(p: &Param, what: &str, h: &mut Helpers) -> (String, String) {
    let ty = p.dtype.c_name();
    let all: String = p.dims.iter().map(|d| format!("[{}]", c_expr(d, h, false))).collect();
    let decl = param_decl(p, &h.names);
    h.layouts = true;
    let mut pro = format!("  /* `{}`: {what}, held by the kernel */\n", p.c_name);
    let _ = writeln!(pro, "  {decl} = teml_buffer(sizeof({ty}{all}));");
    let _ = writeln!(
        pro,
        "  if (!{0}) {{ fputs(\"teml: out of memory for the temporary `{0}`\\n\", stderr); abort(); }}",
        p.c_name
    );
    let back = format!("  munmap({}, sizeof({ty}{all}));\n", p.c_name);
    (pro, back)
}

pub(super) fn param_decl(p: &Param, names: &Rc<CNames>) -> String {
    let ty = p.dtype.c_name();
    let mut h = Helpers { names: names.clone(), ..Helpers::default() };
    match p.dims.as_slice() {
        [] | [_] => format!("{ty} *restrict {}", p.c_name),
        [_, rest @ ..] => {
            let tail: String = rest.iter().map(|d| format!("[{}]", c_expr(d, &mut h, false))).collect();
            format!("{ty} (*restrict {}){tail}", p.c_name)
        }
    }
}

pub(super) fn param_cast(p: &Param, names: &Rc<CNames>) -> String {
    let ty = p.dtype.c_name();
    let mut h = Helpers { names: names.clone(), ..Helpers::default() };
    match p.dims.as_slice() {
        [] | [_] => format!("{ty} *"),
        [_, rest @ ..] => {
            let tail: String = rest.iter().map(|d| format!("[{}]", c_expr(d, &mut h, false))).collect();
            format!("{ty} (*){tail}")
        }
    }
}
