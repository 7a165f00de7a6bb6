//! Word counts of a notebook's cells, over the granted `read-cells`: the tool `word_count`, the
//! resource `wordcount://current` and the template `wordcount://notebooks/{name}`, the prompt
//! `word_budget`, and `replace_word`, an edit of one cell by id that never overwrites someone
//! else's change (grant `overwrite-cell` too). As a hook handler it logs how many words of code
//! each execution sends to a kernel. The guide's Rust example (guests/README.md).

use jupyter_mcp_extension::notebook::{self, CellRef};
use jupyter_mcp_extension::{
    self as ext, CellKind, Extension, HookEvent, Prompt, PromptArguments, PromptResult, Resource,
    ResourceContents, ResourceTemplate, Tool, ToolResult, register_extension,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
struct CountArgs {
    /// The notebook, as named in use_notebook (default: the current one).
    #[serde(default)]
    notebook: String,
}

#[derive(Deserialize, JsonSchema)]
struct ReplaceArgs {
    /// The notebook, as named in use_notebook (default: the current one).
    #[serde(default)]
    notebook: String,
    /// The id of the cell to edit.
    cell_id: String,
    /// The word to replace (whole words only).
    word: String,
    /// What replaces it.
    replacement: String,
    /// The cell's source as you last read it: if someone changed the cell since, nothing is
    /// written and the call says so.
    expected_source: Option<String>,
}

/// One cell's count.
#[derive(Serialize, JsonSchema)]
struct CellCount {
    id: String,
    index: u32,
    kind: String,
    words: usize,
}

/// A notebook's counts.
#[derive(Serialize, JsonSchema)]
struct Counts {
    markdown: usize,
    code: usize,
    total: usize,
    cells: Vec<CellCount>,
}

fn words(text: &str) -> usize {
    text.split_whitespace().count()
}

/// Counts the markdown and code cells (raw cells are not prose nor code).
fn count(notebook: &str) -> ext::Result<Counts> {
    let cells = notebook::read_cells(notebook)?;
    let mut counts = Counts {
        markdown: 0,
        code: 0,
        total: 0,
        cells: Vec::new(),
    };
    for cell in cells {
        let n = words(&cell.source);
        match cell.kind {
            CellKind::Markdown => counts.markdown += n,
            CellKind::Code => counts.code += n,
            CellKind::Raw => continue,
        }
        counts.total += n;
        counts.cells.push(CellCount {
            id: cell.id,
            index: cell.index,
            kind: cell.kind.as_str().into(),
            words: n,
        });
    }
    Ok(counts)
}

/// `text` with every whole-word `word` replaced, and how many were.
fn replace_whole(text: &str, word: &str, replacement: &str) -> (String, usize) {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let (mut out, mut last, mut replaced) = (String::with_capacity(text.len()), 0, 0);
    for (at, _) in text.match_indices(word) {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        if at < last || before.is_some_and(is_word) || after.is_some_and(is_word) {
            continue;
        }
        out.push_str(&text[last..at]);
        out.push_str(replacement);
        last = at + word.len();
        replaced += 1;
    }
    out.push_str(&text[last..]);
    (out, replaced)
}

struct WordCount;

impl WordCount {
    fn word_count(&self, args: CountArgs) -> ext::Result<ToolResult> {
        ToolResult::json(&count(&args.notebook)?)
    }

    fn replace_word(&self, args: ReplaceArgs) -> ext::Result<String> {
        if args.word.trim().is_empty() {
            return Err(ext::Error::invalid(
                "'word' is empty; name the word to replace",
            ));
        }
        let cell = notebook::read_cell(&args.notebook, &CellRef::id(&args.cell_id))?;
        let (source, replaced) = replace_whole(&cell.source, &args.word, &args.replacement);
        if replaced == 0 {
            return Ok(format!(
                "'{}' does not occur in cell {}",
                args.word, cell.id
            ));
        }
        // What the caller saw, else what was just read: either way a change made since by
        // someone else is refused by the host (a conflict), never overwritten.
        let expected = args.expected_source.unwrap_or(cell.source);
        notebook::overwrite_cell(
            &args.notebook,
            &CellRef::id(&cell.id),
            &source,
            Some(&expected),
            None,
        )?;
        Ok(format!(
            "replaced {replaced} occurrence(s) of '{}' in cell {}",
            args.word, cell.id
        ))
    }
}

impl Extension for WordCount {
    fn new() -> Self {
        ext::log::info(&format!(
            "wordcount runs on jupyter-mcp API {} (server {})",
            ext::host::api_version(),
            ext::host::server_version()
        ));
        WordCount
    }

    /// The package's name and version, unless the operator's config names it otherwise
    /// (`config = { name = "..." }`), e.g. to load it twice.
    fn identity(&self) -> Option<ext::Identity> {
        let name = ext::config()["name"].as_str()?.to_owned();
        Some(ext::Identity::new(&name, env!("CARGO_PKG_VERSION")))
    }

    fn tools(&self) -> Vec<Tool<Self>> {
        vec![
            Tool::new(
                "word_count",
                "Counts the words of a notebook's markdown and code cells, per cell and in total.",
                Self::word_count,
            )
            .read_only()
            .returns::<Counts>(),
            Tool::new(
                "replace_word",
                "Replaces a whole word in one cell, named by its id; refused if the cell changed \
                 since you read it.",
                Self::replace_word,
            ),
        ]
    }

    fn resources(&self) -> Vec<Resource> {
        vec![
            Resource::new("wordcount://current", "word-count")
                .description("Word counts of the current notebook (JSON).")
                .mime_type("application/json"),
        ]
    }

    fn resource_templates(&self) -> Vec<ResourceTemplate> {
        vec![
            ResourceTemplate::new("wordcount://notebooks/{name}", "notebook-word-count")
                .description("Word counts of the notebook in use under this name (JSON).")
                .mime_type("application/json"),
        ]
    }

    fn read_resource(&self, uri: &str) -> ext::Result<Vec<ResourceContents>> {
        let notebook = match uri.strip_prefix("wordcount://notebooks/") {
            Some(name) => name,
            None if uri == "wordcount://current" => "",
            None => return Err(ext::Error::NotFound(format!("no resource at '{uri}'"))),
        };
        Ok(vec![ResourceContents::json(uri, &count(notebook)?)?])
    }

    fn prompts(&self) -> Vec<Prompt> {
        vec![
            Prompt::new("word_budget")
                .description("Asks to bring a notebook's prose within a word budget.")
                .argument("budget", "The most words the markdown may have", true)
                .argument("notebook", "The notebook (default: the current one)", false),
        ]
    }

    fn get_prompt(&self, name: &str, arguments: &PromptArguments) -> ext::Result<PromptResult> {
        if name != "word_budget" {
            return Err(ext::Error::NotFound(format!("no prompt '{name}'")));
        }
        let budget: usize = arguments
            .get("budget")
            .and_then(|b| b.trim().parse().ok())
            .ok_or_else(|| ext::Error::invalid("'budget' must be a whole number of words"))?;
        let notebook = arguments.get("notebook").map_or("", String::as_str);
        let counts = count(notebook)?;
        let verdict = if counts.markdown <= budget {
            "It is within budget; tighten it only where it is unclear.".to_owned()
        } else {
            format!("Cut {} words.", counts.markdown - budget)
        };
        Ok(PromptResult::user(format!(
            "The notebook's markdown has {} words (code: {}); the budget is {budget}. {verdict} \
             Keep every code cell as it is.",
            counts.markdown, counts.code
        ))
        .description("Bring the notebook's prose within its word budget"))
    }

    fn on_event(&self, event: &HookEvent, _context: &mut ext::Context) -> ext::Result<()> {
        if let HookEvent::BeforeExecute(execute) = event {
            ext::log::info(&format!(
                "{} words of code sent to kernel {}",
                words(&execute.code),
                execute.kernel_id
            ));
        }
        Ok(())
    }
}

register_extension!(WordCount, hooks);
