//! How an agent should use these tools, written once beside them: a short version in the
//! `initialize` instructions, and the whole of it as a skill ("working-with-notebooks", served
//! through the MCP Skills extension: `skills/list`, `skills/get` and `resources/read` of its
//! `SKILL.md`).

/// What every client shows its model at the start: the gist of the skill.
pub const INSTRUCTIONS: &str = "Read, edit and run Jupyter notebooks and kernels. Code runs on the \
Jupyter side: execute_code runs code in a kernel (a default one is started on first use, or name \
one with kernel_id from list_kernels); list_files explores the server's files; \
connect_to_jupyter switches to another Jupyter Server. Never edit .ipynb files as text with file \
tools (yours or write_file): people may have the notebook open, and a text edit overwrites their \
changes; use use_notebook and the cell tools. Pass each cell's version (from your last read) as \
expected_version when you change or run it: a cell someone changed since is refused with a diff, \
not overwritten. Run long work with background: true and follow it with get_execution. To learn \
what the person (or anyone) changed, pass the revision: of your last read or edit to \
get_notebook_changes (with wait_seconds to wait for them instead of polling), or subscribe to \
notebook://NAME to hear when anyone changes the notebook. Long outputs are cut to keep your \
context small; the result says how to get the rest. The skill skill://working-with-notebooks/SKILL.md \
says all this in more depth.";

/// The skill's name, as its frontmatter and URI give it.
pub const SKILL_NAME: &str = "working-with-notebooks";

/// Where the skill's one file is read.
pub const SKILL_URI: &str = "skill://working-with-notebooks/SKILL.md";

/// The skill's `SKILL.md`, frontmatter included.
pub const SKILL_MD: &str = include_str!("guidance/SKILL.md");

/// The skill's description, as its frontmatter gives it.
pub fn skill_description() -> &'static str {
    SKILL_MD
        .lines()
        .find_map(|line| line.strip_prefix("description: "))
        .expect("SKILL.md's frontmatter has a description")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_skill_names_itself_as_its_uri_does_and_says_what_the_instructions_say() {
        let frontmatter = SKILL_MD
            .strip_prefix("---\n")
            .and_then(|rest| rest.split_once("\n---\n"))
            .expect("SKILL.md opens with a frontmatter block")
            .0;
        assert!(frontmatter.contains(&format!("name: {SKILL_NAME}\n")));
        assert!(SKILL_URI.ends_with(&format!("/{SKILL_NAME}/SKILL.md")));
        assert!(!skill_description().is_empty());
        for point in [
            "as text",
            "expected_version",
            "background",
            "notebook://NAME",
            "get_notebook_changes",
            "wait_seconds",
        ] {
            assert!(INSTRUCTIONS.contains(point), "instructions lack {point}");
            assert!(SKILL_MD.contains(point), "the skill lacks {point}");
        }
        assert!(INSTRUCTIONS.contains(SKILL_URI));
    }
}
