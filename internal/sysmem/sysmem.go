// Package sysmem tells how much memory the machine has, for the checks that
// refuse or scale down allocations before they are made.
package sysmem
