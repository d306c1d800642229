export function render(){}
