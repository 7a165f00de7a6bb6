//! The one skill this server serves (the MCP Skills extension, SEP-2640): how to work with
//! notebooks here. Its text lives beside the tools (`tools::guidance`); this is its wiring:
//! the manifest `skills/list` and `skills/get` answer, and the file `resources/read` serves.

use rmcp::ErrorData as McpError;
use rmcp::model::{
    GetSkillResult, ReadResourceResult, ResourceContents, Skill, SkillFrontmatter, SkillResource,
    SkillResources, sha256_digest,
};
use serde_json::json;

use crate::tools::guidance::{SKILL_MD, SKILL_NAME, SKILL_URI, skill_description};

/// The skill's manifest: its one file, with that file's digest and size.
pub fn skill() -> Skill {
    let file = SkillResource::new(
        SKILL_URI,
        sha256_digest(SKILL_MD.as_bytes()),
        SKILL_MD.len() as u64,
    );
    Skill::new(
        SKILL_URI,
        SkillFrontmatter::new(SKILL_NAME, skill_description()),
        SkillResources::Files(vec![file]),
    )
}

/// `skills/get`: the skill at `uri`, or an error naming the one there is.
pub fn get(uri: &str) -> Result<GetSkillResult, McpError> {
    if uri == SKILL_URI {
        return Ok(GetSkillResult::new(skill()));
    }
    Err(McpError::resource_not_found(
        format!("No skill at '{uri}'. This server serves one skill: {SKILL_URI} (skills/list)."),
        Some(json!({ "uri": uri })),
    ))
}

/// `resources/read` of the skill's `SKILL.md`.
pub fn read() -> ReadResourceResult {
    ReadResourceResult::new(vec![
        ResourceContents::text(SKILL_MD, SKILL_URI).with_mime_type("text/markdown"),
    ])
}
