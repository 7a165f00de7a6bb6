//! The tools through which an agent takes the domain's steps: the MCP face names a step this
//! way, and a guest's face names so the steps only the agent can take. The domain itself names
//! no tool (its messages hold typed `Step`s).

use crate::domain::Step;

/// The core tool that takes `step`.
pub fn tool_for(step: Step) -> &'static str {
    match step {
        Step::OpenNotebook => "use_notebook",
        Step::ListNotebooks => "list_notebooks",
        Step::ReadNotebook => "read_notebook",
        Step::ReadCell => "read_cell",
        Step::RestartNotebook => "restart_notebook",
        Step::ExecuteCode => "execute_code",
        Step::InterruptKernel => "interrupt_kernel",
        Step::InspectVariables => "inspect_variables",
        Step::ListKernels => "list_kernels",
        Step::ListKernelspecs => "list_kernelspecs",
        Step::ListFiles => "list_files",
        Step::ReadFile => "read_file",
        Step::WriteFile => "write_file",
    }
}
